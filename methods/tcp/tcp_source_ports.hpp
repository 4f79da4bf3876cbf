// SPDX-License-Identifier: LGPL-2.1-or-later
// The source port of outbound connections. A server with trusted connections admits only
// sources from its port range (OrangeFS's TrustedPorts, whose own clients bind from port 1023
// down), so a client bound elsewhere would be refused at accept (doc/security.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "methods/method.hpp"
#include "methods/tcp/tcp_address.hpp"

namespace bmi::method::tcp {

struct PortRange {
    std::uint16_t first = 0;  // 1 <= first <= last
    std::uint16_t last = 0;
};

// The tcp_source_ports setting: "" follows the trusted-connection policy in force, "none"
// always lets the kernel choose, "FIRST-LAST" (or one port) is the range to bind from.
struct SourcePortSetting {
    enum class Mode : std::uint8_t { follow_policy, none, range };
    Mode mode = Mode::follow_policy;
    PortRange range;
};
// 0 and out, or -BMI_EINVAL with why.
int parse_source_ports(std::string_view text, SourcePortSetting& out, std::string& why);
// The setting row's check (SettingSpec::text_form).
bool source_ports_form(std::string_view text);

// The privileged ports OrangeFS's own client takes when it is built with trusted connections
// (from 1023 down); libbmi takes them for such a client until a policy says otherwise.
inline constexpr PortRange orangefs_client_ports{1, 1023};

class SourcePorts {
public:
    // orangefs_client: this process is OrangeFS built with trusted connections
    // (Config::orangefs_trusted_build); with the setting empty it binds orangefs_client_ports,
    // and, as OrangeFS's client, only logs when it cannot (an unprivileged tool).
    explicit SourcePorts(SourcePortSetting setting = {}, bool orangefs_client = false);
    // A trusted-connection policy (BMI_TRUSTED_CONNECTION): its ports become the range unless
    // the setting names a range of its own or none.
    void follow(const support::keys::TrustedSources& policy);
    std::optional<PortRange> range() const { return in_force_; }

    // Binds fd, a new socket of target's family, before its connect: to local (empty: the
    // family's wildcard) with a port of the range, highest first and then each time below the
    // last one taken, skipping ports in use. Without a range, local alone if given. When no
    // port of the range can be bound (all in use, or privileged ports without the privilege) the
    // kernel picks one, with one warning per instance: the server decides. 0 or -BMI_E* for
    // a local address the kernel refuses.
    int bind_source(int fd, const SocketAddress& target, const SocketAddress& local);

private:
    SourcePortSetting setting_;
    std::optional<PortRange> in_force_;
    std::uint16_t next_ = 0;           // the port the next bind tries first
    std::uint16_t refused_up_to_ = 0;  // the privilege refused this port and all below
    bool warned_ = false;
    bool quiet_ = false;  // orangefs_client_ports in force: a fallback is logged, not warned
};

// The ports a method or its same-node question binds from: the tcp_source_ports setting of
// config, the OrangeFS default, and config.trusted if it carries a policy. 0, or -BMI_EINVAL
// with a warning naming the setting.
int source_ports_for(const Config& config, SourcePorts& out);

}  // namespace bmi::method::tcp
