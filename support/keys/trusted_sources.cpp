// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/trusted_sources.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <string_view>

#include "bmi-types.h"

namespace bmi::support::keys {

namespace {
std::uint16_t port_of(const sockaddr* from) {
    if (from->sa_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(from)->sin_port);
    return ntohs(reinterpret_cast<const sockaddr_in6*>(from)->sin6_port);
}

// "tcp://192.168.4.0", "tcp://fd00::" or "tcp://[fd00::]" with a prefix length; as OrangeFS
// does, host bits are ignored ("tcp://192.168.4.7" @24 is 192.168.4.0/24).
bool parse_network(std::string_view text, int mask, planes::Cidr& out) {
    constexpr std::string_view scheme = "tcp://";
    if (text.substr(0, scheme.size()) != scheme) return false;
    text.remove_prefix(scheme.size());
    if (text.size() > 2 && text.front() == '[' && text.back() == ']')
        text = text.substr(1, text.size() - 2);
    const std::string host(text);
    out.family = host.find(':') == std::string::npos ? AF_INET : AF_INET6;
    if (inet_pton(out.family, host.c_str(), out.bytes.data()) != 1) return false;
    if (mask < 0 || mask > (out.family == AF_INET ? 32 : 128)) return false;
    out.prefix = static_cast<unsigned>(mask);
    planes::clear_host_bits(out);
    return true;
}
}  // namespace

const char* TrustedSources::refusal(const sockaddr* from) const {
    if (from->sa_family != AF_INET && from->sa_family != AF_INET6)
        return ports_enforced || networks_enforced ? "address family" : nullptr;
    if (networks_enforced) {
        const planes::Cidr host = planes::host_cidr(from);
        if (std::none_of(networks.begin(), networks.end(),
                         [&](const planes::Cidr& net) { return net.contains(host); }))
            return "network";
    }
    if (ports_enforced) {
        const std::uint16_t port = port_of(from);
        if (port < first_port || port > last_port) return "port";
    }
    return nullptr;
}

std::string TrustedSources::text() const {
    std::string out;
    if (ports_enforced)
        out.append("ports ")
            .append(std::to_string(first_port))
            .append("-")
            .append(std::to_string(last_port));
    if (networks_enforced) {
        out.append(out.empty() ? "networks" : ", networks");
        for (const auto& net : networks) out.append(" ").append(net.text());
    }
    return out.empty() ? "any source" : out;
}

int make_trusted_sources(int ports_enabled, const unsigned long ports[2], int networks_enabled,
                         int count, char* const* networks, const int* masks, TrustedSources& out,
                         std::string& error) {
    TrustedSources made;
    if (ports_enabled == 1) {
        if (ports[0] > 65535 || ports[1] > 65535 || ports[1] < ports[0]) {
            error = "TrustedPorts ";
            error.append(std::to_string(ports[0])).append("-").append(std::to_string(ports[1]));
            error.append(" is not a port range");
            return -BMI_EINVAL;
        }
        made.ports_enforced = true;
        made.first_port = static_cast<std::uint16_t>(ports[0]);
        made.last_port = static_cast<std::uint16_t>(ports[1]);
    }
    if (networks_enabled == 1) {
        // An empty list would refuse everyone: surely a mistake, not a policy.
        if (count <= 0 || networks == nullptr || masks == nullptr) {
            error = "TrustedNetwork is enabled but lists no network";
            return -BMI_EINVAL;
        }
        for (int i = 0; i < count; ++i) {
            planes::Cidr net;
            if (networks[i] == nullptr || !parse_network(networks[i], masks[i], net)) {
                error = "TrustedNetwork ";
                error.append(networks[i] != nullptr ? networks[i] : "(null)").append("@");
                error.append(std::to_string(masks[i]));
                error.append(" is not a tcp:// network and prefix length");
                return -BMI_EINVAL;
            }
            made.networks.push_back(net);
        }
        made.networks_enforced = true;
    }
    out = std::move(made);
    return 0;
}

}  // namespace bmi::support::keys
