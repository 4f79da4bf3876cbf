// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/plane_binding.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bmi-types.h"
#include "support/planes/qos.hpp"

namespace bmi::support::planes {

namespace {
std::string who(const Allocation& a) { return "allocation " + a.id + ": "; }

// The allocated ports in ascending order; the slice takes its endpts of them.
std::vector<std::uint16_t> ascending_ports(const PortRanges& ranges) {
    std::vector<std::uint16_t> ports;
    for (const PortRange& r : ranges.ranges())
        for (unsigned p = r.first; p <= r.last; ++p) ports.push_back(static_cast<std::uint16_t>(p));
    return ports;
}

int bind_tcp(const Allocation& a, std::uint32_t slice, PlaneBinding& out, std::string& error) {
    std::string why;
    const auto subnet = parse_cidr(a.plane, why);
    if (!subnet) {
        error = who(a) + "plane: " + why;
        return -BMI_EINVAL;
    }
    out.subnet = *subnet;
    const auto host = local_address_in(*subnet);
    if (!host) {
        error = who(a) + "plane: no interface of this node is on " + a.plane;
        return -BMI_EADDRNOTAVAIL;
    }
    out.local_host = *host;
    const auto ports = ascending_ports(a.ports);
    const std::size_t first = static_cast<std::size_t>(slice) * a.endpoints;
    if (first + a.endpoints > ports.size()) {
        error = who(a) + "ports: local slice " + std::to_string(slice) + " needs ports " +
                std::to_string(first + 1) + " to " + std::to_string(first + a.endpoints) +
                " of the allocated set, which has " + std::to_string(ports.size());
        return -BMI_EINVAL;
    }
    out.ports.assign(ports.begin() + static_cast<std::ptrdiff_t>(first),
                     ports.begin() + static_cast<std::ptrdiff_t>(first + a.endpoints));
    return 0;
}

int bind_verbs(const Allocation& a, PlaneBinding& out, std::string& error) {
    const std::size_t colon = a.plane.rfind(':');
    if (a.plane.find('/') != std::string::npos || colon == std::string::npos) {
        error = who(a) + "plane: " + a.plane +
                " is a GID prefix; verbs allocations are bound by device:port";
        return -BMI_EINVAL;
    }
    out.device = a.plane.substr(0, colon);
    out.device_port = std::atoi(a.plane.c_str() + colon + 1);
    // Whether the device and port exist is the verbs method's to check when it opens them:
    // it is the one that links libibverbs.
    return 0;
}

void bind_ofi(const Allocation& a, PlaneBinding& out) {
    const std::size_t slash = a.plane.find('/');
    out.ofi_provider = a.plane.substr(0, slash);
    if (slash != std::string::npos) out.ofi_domain = a.plane.substr(slash + 1);
}

int bind_shm(const Allocation& a, std::string& error) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || a.plane != host) {
        error = who(a) + "plane: shm plane " + a.plane + " is another node (this is " +
                std::string(host) + ")";
        return -BMI_EADDRNOTAVAIL;
    }
    return 0;
}

}  // namespace

std::optional<std::string> local_address_in(const Cidr& subnet) {
    if (subnet.prefix == 0) return std::string(subnet.family == AF_INET ? "0.0.0.0" : "::");
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return std::nullopt;
    std::optional<std::string> found;
    for (const ifaddrs* ifa = list; ifa != nullptr && !found; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
        if (ifa->ifa_addr->sa_family != subnet.family) continue;
        const Cidr address = host_cidr(ifa->ifa_addr);
        if (!subnet.contains(address)) continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (inet_ntop(address.family, address.bytes.data(), text, sizeof text) != nullptr)
            found = std::string(text);
    }
    freeifaddrs(list);
    return found;
}

int bind_allocation(const Allocation& allocation, std::uint32_t slice, PlaneBinding& out,
                    std::string& error) {
    out = PlaneBinding{};
    out.allocation_id = allocation.id;
    out.type = allocation.type;
    out.plane = allocation.plane;
    out.qos = allocation.qos;
    if (!allocation.qos.empty()) out.dscp = dscp_for_level(allocation.qos);
    out.bandwidth_mbps = allocation.bandwidth_mbps;
    switch (allocation.type) {
        case PlaneType::tcp:
            return bind_tcp(allocation, slice, out, error);
        case PlaneType::verbs:
            return bind_verbs(allocation, out, error);
        case PlaneType::shm:
            return bind_shm(allocation, error);
        case PlaneType::ofi:
            bind_ofi(allocation, out);
            return 0;
    }
    return -BMI_EINVAL;
}

std::vector<EnforcementNote> enforcement_notes(const PlaneBinding& b) {
    std::vector<EnforcementNote> notes;
    char line[256];
    if (!b.qos.empty() && !b.dscp) {
        notes.push_back({"qos " + b.qos +
                             ": not a level libbmi can map to a code point (doc/planes.md); "
                             "not enforced on this node",
                         false});
    } else if (b.dscp) {
        if (b.type == PlaneType::tcp)
            std::snprintf(line, sizeof line,
                          "qos %s: DSCP %d (IP_TOS/IPV6_TCLASS 0x%02x, "
                          "SO_PRIORITY %d) on every connection",
                          b.qos.c_str(), *b.dscp, tos_byte(*b.dscp), socket_priority(*b.dscp));
        else if (b.type == PlaneType::verbs)
            std::snprintf(line, sizeof line,
                          "qos %s: service level %d, traffic class 0x%02x on "
                          "every queue pair",
                          b.qos.c_str(), service_level(*b.dscp), tos_byte(*b.dscp));
        else if (b.type == PlaneType::ofi && b.ofi_provider != "shm")
            // libfabric takes the class as a hint: a provider that cannot mark its traffic
            // ignores it and says nothing, so libbmi cannot claim it is enforced.
            std::snprintf(line, sizeof line,
                          "qos %s: traffic class DSCP %d (FI_TC_DSCP) asked of libfabric's %s "
                          "on every endpoint; enforced only where the provider marks traffic",
                          b.qos.c_str(), *b.dscp, b.ofi_provider.c_str());
        else
            std::snprintf(line, sizeof line,
                          "qos %s: shared memory has no network to mark; "
                          "not enforced",
                          b.qos.c_str());
        notes.push_back({line, b.type == PlaneType::tcp || b.type == PlaneType::verbs});
    }
    if (b.bandwidth_mbps > 0) {
        if (b.type == PlaneType::tcp)
            std::snprintf(line, sizeof line,
                          "bw %g Mbit/s: SO_MAX_PACING_RATE %.0f bytes/s on "
                          "each connection (the kernel paces sockets one by one; the sum over "
                          "several connections is not capped)",
                          b.bandwidth_mbps, b.bandwidth_mbps * 1e6 / 8);
        else
            std::snprintf(line, sizeof line, "bw %g Mbit/s: %s cannot pace; not enforced",
                          b.bandwidth_mbps, std::string(to_string(b.type)).c_str());
        notes.push_back({line, b.type == PlaneType::tcp});
    }
    return notes;
}

std::string describe(const PlaneBinding& b) {
    std::string out = std::string(to_string(b.type)) + " " + b.plane + " (" + b.allocation_id + ")";
    if (b.type == PlaneType::tcp) {
        out += " on " + b.local_host + " port" + (b.ports.size() == 1 ? " " : "s ");
        for (std::size_t i = 0; i < b.ports.size(); ++i) {
            if (i) out += ',';
            out += std::to_string(b.ports[i]);
        }
    }
    return out;
}

}  // namespace bmi::support::planes
