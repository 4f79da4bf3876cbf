// SPDX-License-Identifier: LGPL-2.1-or-later
// Address parsing, resolution and range matching for the tcp method.
#include "methods/tcp/tcp_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "bmi-types.h"
#include "support/method_address/method_address.hpp"

namespace bmi::method::tcp {

namespace {
// IPv4-mapped IPv6 peers (a dual-stack listener) are compared and shown as IPv4, which is how
// an administrator writes them in a range.
bool as_ipv4(const SocketAddress& addr, in_addr& out) {
    if (addr.family() == AF_INET) {
        out = reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr;
        return true;
    }
    if (addr.family() == AF_INET6) {
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            std::memcpy(&out, s6->sin6_addr.s6_addr + 12, 4);
            return true;
        }
    }
    return false;
}

bool prefix_equal(const std::uint8_t* a, const std::uint8_t* b, int bits) {
    for (int i = 0; bits > 0; ++i, bits -= 8) {
        const std::uint8_t mask = bits >= 8 ? 0xff : static_cast<std::uint8_t>(0xff << (8 - bits));
        if ((a[i] & mask) != (b[i] & mask)) return false;
    }
    return true;
}

int match_wildcard(const std::string& ip, std::string_view pattern) {
    // Only a trailing '*' after a separator is meaningful ("192.168.*", "fe80:*").
    std::string_view prefix = pattern.substr(0, pattern.size() - 1);
    if (prefix.empty() || (prefix.back() != '.' && prefix.back() != ':')) return -BMI_EINVAL;
    for (char c : prefix) {
        const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                        (c >= 'A' && c <= 'F') || c == '.' || c == ':';
        if (!ok) return -BMI_EINVAL;
    }
    return ip.compare(0, prefix.size(), prefix) == 0 ? 1 : 0;
}
}  // namespace

std::optional<ParsedAddress> parse_tcp_address(std::string_view address) {
    auto split = support::split_scheme(address);
    if (!split || split->scheme != "tcp") return std::nullopt;
    auto hp = support::parse_host_port(split->rest);
    if (!hp) return std::nullopt;
    ParsedAddress out;
    out.canonical = "tcp://" + support::format_host_port(hp->host, hp->port);
    out.host = hp->host;
    out.port = hp->port;
    return out;
}

std::optional<ParsedAddress> parse_listen_address(std::string_view address, bool port_optional) {
    if (auto parsed = parse_tcp_address(address); parsed || !port_optional) return parsed;
    auto split = support::split_scheme(address);
    if (!split || split->scheme != "tcp") return std::nullopt;
    // Only a string with no port at all gains one; "tcp://host:" stays malformed.
    if (support::names_port(split->rest)) return std::nullopt;
    return parse_tcp_address("tcp://" + std::string(split->rest) + ":0");
}

namespace {
int resolve_with(const std::string& host, std::uint16_t port, int flags, SocketAddress& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    addrinfo* result = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr)
        return -BMI_EHOSTNTFD;
    std::memcpy(&out.storage, result->ai_addr, result->ai_addrlen);
    out.length = result->ai_addrlen;
    freeaddrinfo(result);
    if (out.family() == AF_INET)
        reinterpret_cast<sockaddr_in*>(&out.storage)->sin_port = htons(port);
    else if (out.family() == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&out.storage)->sin6_port = htons(port);
    else
        return -BMI_EHOSTNTFD;
    return 0;
}
}  // namespace

int resolve(const std::string& host, std::uint16_t port, SocketAddress& out) {
    return resolve_with(host, port, 0, out);
}

int resolve_literal(const std::string& host, std::uint16_t port, SocketAddress& out) {
    return resolve_with(host, port, AI_NUMERICHOST, out);
}

SocketAddress wildcard_of(const SocketAddress& addr, std::uint16_t port) {
    SocketAddress out;
    if (addr.family() == AF_INET6) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons(port);
        out.length = sizeof(sockaddr_in6);
    } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&out.storage);
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        s4->sin_port = htons(port);
        out.length = sizeof(sockaddr_in);
    }
    return out;
}

SocketAddress every_address_for(const std::string& host, std::uint16_t port) {
    SocketAddress family;
    in_addr v4{};
    family.storage.ss_family = inet_pton(AF_INET, host.c_str(), &v4) == 1 ? AF_INET : AF_INET6;
    return wildcard_of(family, port);
}

std::string_view without_trailing_space(std::string_view address) {
    const auto end = address.find_last_not_of(" \t\r\n\v\f");
    return end == std::string_view::npos ? std::string_view{} : address.substr(0, end + 1);
}

std::string ip_text(const SocketAddress& addr) {
    char buf[INET6_ADDRSTRLEN] = {};
    in_addr v4{};
    if (as_ipv4(addr, v4)) return inet_ntop(AF_INET, &v4, buf, sizeof buf) ? buf : "";
    if (addr.family() == AF_INET6) {
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
        return inet_ntop(AF_INET6, &s6->sin6_addr, buf, sizeof buf) ? buf : "";
    }
    return "";
}

std::uint16_t port_of(const SocketAddress& addr) {
    if (addr.family() == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_port);
    if (addr.family() == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_port);
    return 0;
}

std::string describe(const SocketAddress& addr) {
    return "tcp://" + support::format_host_port(ip_text(addr), port_of(addr));
}

int match_range(const SocketAddress& addr, std::string_view id_string, int netmask) {
    auto split = support::split_scheme(id_string);
    if (!split || split->scheme != "tcp" || split->rest.empty()) return -BMI_EINVAL;
    std::string_view text = split->rest;
    if (text.back() == '*') return match_wildcard(ip_text(addr), text);
    if (text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
    const std::string host(text);

    in_addr want4{};
    in6_addr want6{};
    if (inet_pton(AF_INET, host.c_str(), &want4) == 1) {
        if (netmask < 0 || netmask > 32) return -BMI_EINVAL;
        in_addr have{};
        if (!as_ipv4(addr, have)) return 0;
        return prefix_equal(reinterpret_cast<const std::uint8_t*>(&have),
                            reinterpret_cast<const std::uint8_t*>(&want4), netmask)
                   ? 1
                   : 0;
    }
    if (inet_pton(AF_INET6, host.c_str(), &want6) == 1) {
        if (netmask < 0 || netmask > 128) return -BMI_EINVAL;
        if (addr.family() != AF_INET6) return 0;
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
        return prefix_equal(s6->sin6_addr.s6_addr, want6.s6_addr, netmask) ? 1 : 0;
    }
    return -BMI_EINVAL;
}

}  // namespace bmi::method::tcp
