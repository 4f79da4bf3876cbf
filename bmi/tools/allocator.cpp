// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bmi/tools/allocator.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace bmi::tools {

using support::planes::InventoryPlane;
using support::planes::PlaneType;
using support::planes::PortRange;
using support::planes::PortRanges;

namespace {
// The `n` lowest ports of `free`, removed from it. The caller checked free.count() >= n.
PortRanges take_lowest(PortRanges& free, std::size_t n) {
    PortRanges taken;
    PortRanges rest;
    for (const PortRange& r : free.ranges()) {
        const std::size_t size = static_cast<std::size_t>(r.last - r.first) + 1;
        const std::size_t take = std::min(n, size);
        if (take > 0) taken.add({r.first, static_cast<std::uint16_t>(r.first + take - 1)});
        if (take < size) rest.add({static_cast<std::uint16_t>(r.first + take), r.last});
        n -= take;
    }
    free = std::move(rest);
    return taken;
}

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}
}  // namespace

Allocator::Allocator(Inventory inventory, std::string key_dir)
    : inventory_(std::move(inventory)), key_dir_(std::move(key_dir)) {
    for (const InventoryPlane& p : inventory_.planes) state_.push_back({p.ports, p.bandwidth_mbps});
}

AllocationOutcome Allocator::allocate(const RequestEntry& req) {
    AllocationOutcome out;
    const auto refuse = [&](std::string why) {
        out.error = std::move(why);
        out.degradations.clear();
        return out;
    };
    const PlaneType type = *req.type.value;
    const std::size_t asked_endpoints = *req.endpoints.value;
    const auto free_ports = [&](std::size_t i) {
        return type == PlaneType::tcp ? state_[i].free_ports.count() : asked_endpoints;
    };

    // The plane: the one asked for if it is there and has room, else (unless required) the
    // first of the same type with room for every endpoint, else the roomiest.
    std::optional<std::size_t> chosen;
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < inventory_.planes.size(); ++i)
        if (inventory_.planes[i].plane.type == type) candidates.push_back(i);
    if (candidates.empty())
        return refuse("type: the inventory has no " + std::string(to_string(type)) + " plane");
    if (req.plane.value) {
        const InventoryPlane* p = inventory_.find(*req.plane.value);
        if (p != nullptr && p->plane.type == type) {
            const std::size_t i = static_cast<std::size_t>(p - inventory_.planes.data());
            if (free_ports(i) >= asked_endpoints || req.plane.required) chosen = i;
        } else if (req.plane.required) {
            return refuse("plane: the inventory has no " + std::string(to_string(type)) +
                          " plane '" + *req.plane.value + "'");
        }
    }
    if (!chosen) {
        for (std::size_t i : candidates)
            if (free_ports(i) >= asked_endpoints) {
                chosen = i;
                break;
            }
    }
    if (!chosen)
        chosen = *std::max_element(
            candidates.begin(), candidates.end(),
            [&](std::size_t a, std::size_t b) { return free_ports(a) < free_ports(b); });
    const InventoryPlane& plane = inventory_.planes[*chosen];
    PlaneState& state = state_[*chosen];
    const std::string plane_label = plane.plane.name.empty() ? plane.plane.identifier
                                                             : plane.plane.name;

    Allocation a;
    a.id = req.id;
    a.type = type;
    a.plane = plane.plane.identifier;
    if (req.plane.value && *req.plane.value != plane.plane.name &&
        *req.plane.value != plane.plane.identifier) {
        a.degraded.push_back("plane");
        out.degradations.push_back("plane: asked " + *req.plane.value + ", granted " + plane_label);
    }

    // Endpoints: a tcp endpoint is one port of the pool.
    const std::size_t available = free_ports(*chosen);
    a.endpoints = std::min(asked_endpoints, available);
    if (a.endpoints < asked_endpoints) {
        if (req.endpoints.required || a.endpoints == 0)
            return refuse("endpts: plane " + plane_label + " has " + std::to_string(available) +
                          " free port(s), " + std::to_string(asked_endpoints) + " asked" +
                          (req.endpoints.required ? " and required" : ""));
        a.degraded.push_back("endpts");
        out.degradations.push_back("endpts: asked " + std::to_string(asked_endpoints) +
                                   ", granted " + std::to_string(a.endpoints));
    }

    if (req.qos.value) {
        const bool offered = std::find(plane.qos.begin(), plane.qos.end(), *req.qos.value) !=
                             plane.qos.end();
        if (offered) {
            a.qos = *req.qos.value;
        } else if (req.qos.required) {
            return refuse("qos: plane " + plane_label + " does not offer '" + *req.qos.value + "'");
        } else {
            a.degraded.push_back("qos");
            out.degradations.push_back("qos: plane " + plane_label + " does not offer '" +
                                       *req.qos.value + "'; granted none");
        }
    }

    // Bandwidth: a plane with no stated capacity grants any cap; one with a capacity shares it.
    double bandwidth_taken = 0;
    if (req.bandwidth_mbps.value) {
        const double asked = *req.bandwidth_mbps.value;
        const bool capped = plane.bandwidth_mbps > 0;
        a.bandwidth_mbps = capped ? std::min(asked, state.free_bandwidth_mbps) : asked;
        if (a.bandwidth_mbps < asked) {
            if (req.bandwidth_mbps.required)
                return refuse("bw: plane " + plane_label + " has " +
                              number(state.free_bandwidth_mbps) + " Mbit/s free, " + number(asked) +
                              " required");
            a.degraded.push_back("bw");
            out.degradations.push_back("bw: asked " + number(asked) + " Mbit/s, granted " +
                                       (a.bandwidth_mbps > 0 ? number(a.bandwidth_mbps) : "none"));
        }
        if (capped) bandwidth_taken = a.bandwidth_mbps;
    }

    // The key last: it is the one step with an effect outside this object, so it comes after
    // every check that could still refuse.
    if (req.key.value && *req.key.value) {
        const std::string path = key_dir_.empty() ? "" : key_dir_ + "/" + req.id + ".key";
        const std::string why = path.empty() ? "no key directory given"
                                             : write_fresh_key_file(path);
        if (why.empty()) {
            a.key_file = path;
        } else if (req.key.required) {
            return refuse("key: " + why);
        } else {
            a.degraded.push_back("key");
            out.degradations.push_back("key: " + why + "; granted none");
        }
    }

    if (type == PlaneType::tcp) a.ports = take_lowest(state.free_ports, a.endpoints);
    state.free_bandwidth_mbps -= bandwidth_taken;
    out.allocation = std::move(a);
    return out;
}

std::string write_fresh_key_file(const std::string& path) {
    std::array<std::uint8_t, 32> key{};
    // getrandom blocks only until the kernel's pool is first seeded, then never fails short
    // for 32 bytes; a signal may still interrupt it.
    ssize_t got = -1;
    do {
        got = getrandom(key.data(), key.size(), 0);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(key.size()))
        return "getrandom: " + std::string(std::strerror(errno));
    static constexpr char hex[] = "0123456789abcdef";
    std::array<char, 65> text{};
    for (std::size_t i = 0; i < key.size(); ++i) {
        text[2 * i] = hex[key[i] >> 4];
        text[2 * i + 1] = hex[key[i] & 0xf];
    }
    text[64] = '\n';
    key.fill(0);
    // O_EXCL: an existing file is another allocation's key, or a trap; never write through it.
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return path + ": " + std::strerror(errno);
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    text.fill(0);
    const bool closed = close(fd) == 0;
    if (!written || !closed) {
        unlink(path.c_str());
        return path + ": write failed";
    }
    return "";
}

}  // namespace bmi::tools
