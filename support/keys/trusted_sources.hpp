// SPDX-License-Identifier: LGPL-2.1-or-later
// Which sources may open a connection: OrangeFS's trusted connections (its TrustedPorts and
// TrustedNetwork settings), a complement to keys that refuses a connection at accept, from
// where it comes, before it sends a byte (doc/security.md, "Trusted connections").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/planes/cidr.hpp"

struct sockaddr;

namespace bmi::support::keys {

struct TrustedSources {
    bool ports_enforced = false;  // the source port must lie in [first_port, last_port]
    std::uint16_t first_port = 0;
    std::uint16_t last_port = 0;
    bool networks_enforced = false;  // the source address must lie in one of networks
    std::vector<planes::Cidr> networks;

    // nullptr if a connection from `from` is allowed, else why not ("port", "network"). An
    // IPv4-mapped IPv6 source is matched as the IPv4 address it carries.
    const char* refusal(const sockaddr* from) const;
    std::string text() const;  // "ports 1024-2047, networks 10.0.0.0/8": for the log
};

// Builds the sources from OrangeFS's values: ports {min, max}; networks as BMI addresses
// ("tcp://192.168.4.0", "tcp://[fd00::]") with masks as prefix lengths. A disabled half is not
// read. 0, or -BMI_EINVAL with `error` naming the bad value.
int make_trusted_sources(int ports_enabled, const unsigned long ports[2], int networks_enabled,
                         int count, char* const* networks, const int* masks, TrustedSources& out,
                         std::string& error);

}  // namespace bmi::support::keys
