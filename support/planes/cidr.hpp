// SPDX-License-Identifier: LGPL-2.1-or-later
// IP subnets in CIDR form: the identifier of an IP plane, the same on every node of the plane.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr;

namespace bmi::support::planes {

struct Cidr {
    int family = 0;                        // AF_INET or AF_INET6
    std::array<std::uint8_t, 16> bytes{};  // the network address; 4 bytes used for AF_INET
    unsigned prefix = 0;                   // 0..32 or 0..128

    std::string text() const;                  // "10.20.0.0/16", "fd00::/64"
    bool contains(const Cidr& address) const;  // address's bytes lie inside this subnet
};

// "a.b.c.d/n" or "v6/n". Rejected (nullopt, `error` says why): no '/', a bad address, a prefix
// out of range, and host bits set ("10.20.1.0/16": the subnet is 10.20.0.0/16).
std::optional<Cidr> parse_cidr(std::string_view text, std::string& error);

// Clears every bit of c past its prefix; true if any was set.
bool clear_host_bits(Cidr& c);

// The subnet an interface address with this netmask belongs to.
Cidr subnet_of(int family, const void* address, const void* netmask);

// One host's address as a CIDR of full length (/32 or /128), for matching against planes. An
// IPv4-mapped IPv6 address (a dual-stack socket's peer) is folded back to its IPv4 form.
Cidr host_cidr(const sockaddr* address);

}  // namespace bmi::support::planes
