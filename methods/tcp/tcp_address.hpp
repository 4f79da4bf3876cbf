// SPDX-License-Identifier: LGPL-2.1-or-later
// tcp address strings and socket addresses: canonical form, resolution, text, range matching.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bmi::method::tcp {

struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;

    bool empty() const { return length == 0; }
    int family() const { return storage.ss_family; }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
    sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
};

struct ParsedAddress {
    std::string canonical;  // "tcp://host:port", brackets around IPv6 literals
    std::string host;
    std::uint16_t port = 0;
};

// "tcp://host:port" -> parts; nullopt for another scheme or a malformed string.
std::optional<ParsedAddress> parse_tcp_address(std::string_view address);
// A listen address: as parse_tcp_address, and with port_optional also "tcp://host" (or
// "tcp://[v6]"), which means port 0: the kernel picks one. The standalone dialect's servers
// start that way (Mercury asks for the port afterwards); OrangeFS's always name a port.
std::optional<ParsedAddress> parse_listen_address(std::string_view address, bool port_optional);

// getaddrinfo on host (numeric or name); 0 or -BMI_EHOSTNTFD.
int resolve(const std::string& host, std::uint16_t port, SocketAddress& out);
// The same for an IPv4/IPv6 literal only, which never blocks; -BMI_EHOSTNTFD for a name.
int resolve_literal(const std::string& host, std::uint16_t port, SocketAddress& out);
// The wildcard address of addr's family with port.
SocketAddress wildcard_of(const SocketAddress& addr, std::uint16_t port);
// What a server binds without BMI_TCP_BIND_SPECIFIC: every address, chosen without resolving
// host, because OrangeFS configurations write hosts such as "NULL" there. An IPv4 literal gets
// the IPv4 wildcard; any other host the IPv6 one, which open_listener makes dual-stack.
SocketAddress every_address_for(const std::string& host, std::uint16_t port);
// address without trailing whitespace: configuration files often leave a newline behind.
std::string_view without_trailing_space(std::string_view address);

// "192.168.1.5" / "::1" (IPv4-mapped IPv6 shown as IPv4); "" if unknown.
std::string ip_text(const SocketAddress& addr);
std::uint16_t port_of(const SocketAddress& addr);
// "tcp://ip:port" of addr.
std::string describe(const SocketAddress& addr);

// BMI_query_addr_range against addr: "tcp://a.b.c.d" with a CIDR netmask, or a wildcard form
// "tcp://a.b.*" (netmask ignored). 1 match, 0 no match, -BMI_EINVAL malformed.
int match_range(const SocketAddress& addr, std::string_view id_string, int netmask);

}  // namespace bmi::method::tcp
