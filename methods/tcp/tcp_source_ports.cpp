// SPDX-License-Identifier: LGPL-2.1-or-later
// Binding outbound connections into a port range (tcp_source_ports.hpp).
#include "methods/tcp/tcp_source_ports.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "bmi-types.h"
#include "methods/tcp/tcp_settings.hpp"
#include "support/error/error_map.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

namespace {

bool parse_port(std::string_view text, std::uint16_t& out) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535)
        return false;
    out = static_cast<std::uint16_t>(value);
    return true;
}

SocketAddress with_port(SocketAddress address, std::uint16_t port) {
    if (address.family() == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&address.storage)->sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in*>(&address.storage)->sin_port = htons(port);
    return address;
}

int bind_local(int fd, const SocketAddress& local) {
    if (local.empty() || bind(fd, local.get(), local.length) == 0) return 0;
    return support::bmi_error_from_errno(errno);
}

std::uint16_t below(std::uint16_t port, const PortRange& range) {
    return port <= range.first ? range.last : static_cast<std::uint16_t>(port - 1);
}

}  // namespace

int parse_source_ports(std::string_view text, SourcePortSetting& out, std::string& why) {
    out = SourcePortSetting{};
    if (text.empty()) return 0;
    if (text == "none") {
        out.mode = SourcePortSetting::Mode::none;
        return 0;
    }
    const auto dash = text.find('-');
    PortRange range;
    const bool parsed = dash == std::string_view::npos
                            ? parse_port(text, range.first) && parse_port(text, range.last)
                            : parse_port(text.substr(0, dash), range.first) &&
                                  parse_port(text.substr(dash + 1), range.last);
    if (!parsed) {
        why = "want FIRST-LAST with ports from 1 to 65535, one port, \"none\", or nothing";
        return -BMI_EINVAL;
    }
    if (range.first > range.last) {
        why = "the first port is above the last";
        return -BMI_EINVAL;
    }
    out.mode = SourcePortSetting::Mode::range;
    out.range = range;
    return 0;
}

bool source_ports_form(std::string_view text) {
    SourcePortSetting ignored;
    std::string why;
    return parse_source_ports(text, ignored, why) == 0;
}

SourcePorts::SourcePorts(SourcePortSetting setting, bool orangefs_client) : setting_(setting) {
    if (setting_.mode == SourcePortSetting::Mode::range) in_force_ = setting_.range;
    if (setting_.mode == SourcePortSetting::Mode::follow_policy && orangefs_client) {
        in_force_ = orangefs_client_ports;
        quiet_ = true;
    }
    if (in_force_) next_ = in_force_->last;
}

void SourcePorts::follow(const support::keys::TrustedSources& policy) {
    if (setting_.mode != SourcePortSetting::Mode::follow_policy) return;
    std::optional<PortRange> range;
    // Port 0 is no source port: a policy from 0 binds from 1 up.
    if (policy.ports_enforced && policy.last_port > 0)
        range = PortRange{std::max<std::uint16_t>(policy.first_port, 1), policy.last_port};
    in_force_ = range;
    quiet_ = false;
    if (in_force_) next_ = in_force_->last;
}

int SourcePorts::bind_source(int fd, const SocketAddress& target, const SocketAddress& local) {
    if (!in_force_) return bind_local(fd, local);
    const PortRange range = *in_force_;
    const SocketAddress base = local.empty() ? wildcard_of(target, 0) : local;
    bool refused = false;  // the privilege refused a port, rather than all being in use
    std::uint16_t port = next_;
    for (unsigned tried = 0; tried <= static_cast<unsigned>(range.last - range.first);
         ++tried, port = below(port, range)) {
        if (port <= refused_up_to_) continue;
        const SocketAddress at = with_port(base, port);
        if (bind(fd, at.get(), at.length) == 0) {
            next_ = below(port, range);
            return 0;
        }
        if (errno == EACCES || errno == EPERM) {
            // The privilege is a threshold (ip_unprivileged_port_start): no port at or
            // below this one will do, now or later.
            refused_up_to_ = std::max(refused_up_to_, port);
            refused = true;
        } else if (errno != EADDRINUSE) {
            return support::bmi_error_from_errno(errno);
        }
    }
    refused = refused || range.first <= refused_up_to_;
    if (quiet_) {
        BMI_LOG(tcp, "tcp: no source port of %u-%u could be bound (%s); the kernel picks one",
                range.first, range.last, refused ? "no privilege" : "all in use");
    } else if (!warned_) {
        warned_ = true;
        BMI_WARN("bmi_tcp: no source port of %u-%u could be bound (%s); connecting from a "
                 "port the kernel picks, which a server trusting only those ports refuses",
                 range.first, range.last,
                 refused ? "privileged ports need root or CAP_NET_BIND_SERVICE" : "all in use");
    }
    return bind_local(fd, local);
}

int source_ports_for(const Config& config, SourcePorts& out) {
    const std::string& text = config.settings.text(SettingId::source_ports);
    SourcePortSetting setting;
    if (std::string why; parse_source_ports(text, setting, why) != 0) {
        BMI_WARN("bmi_tcp: tcp_source_ports (BMI_TCP_SOURCE_PORTS) '%s': %s", text.c_str(),
                 why.c_str());
        return -BMI_EINVAL;
    }
    out = SourcePorts(setting, config.orangefs_trusted_build);
    if (config.trusted) out.follow(*config.trusted);
    return 0;
}

}  // namespace bmi::method::tcp
