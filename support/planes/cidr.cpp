// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/cidr.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <bit>
#include <cstring>

#include "support/planes/text_fields.hpp"

namespace bmi::support::planes {

namespace {
std::size_t address_size(int family) { return family == AF_INET ? 4 : 16; }
}  // namespace

bool clear_host_bits(Cidr& c) {
    bool had_host_bits = false;
    for (std::size_t i = 0; i < address_size(c.family); ++i) {
        const unsigned first_bit = static_cast<unsigned>(i) * 8;
        std::uint8_t keep = 0xff;
        if (first_bit >= c.prefix)
            keep = 0;
        else if (c.prefix - first_bit < 8)
            keep = static_cast<std::uint8_t>(0xff << (8 - (c.prefix - first_bit)));
        if ((c.bytes[i] & ~keep) != 0) had_host_bits = true;
        c.bytes[i] &= keep;
    }
    return had_host_bits;
}

std::string Cidr::text() const {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(family, bytes.data(), buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(prefix);
}

bool Cidr::contains(const Cidr& address) const {
    if (address.family != family) return false;
    Cidr masked = address;
    masked.prefix = prefix;
    clear_host_bits(masked);
    return std::memcmp(masked.bytes.data(), bytes.data(), address_size(family)) == 0;
}

std::optional<Cidr> parse_cidr(std::string_view text, std::string& error) {
    const std::size_t slash = text.find('/');
    if (slash == std::string_view::npos) {
        error = quoted(text) + " is not a CIDR (address/prefix)";
        return std::nullopt;
    }
    const std::string address(text.substr(0, slash));
    Cidr c;
    c.family = address.find(':') == std::string::npos ? AF_INET : AF_INET6;
    if (inet_pton(c.family, address.c_str(), c.bytes.data()) != 1) {
        error = quoted(address) + " is not an IP address";
        return std::nullopt;
    }
    const auto prefix = parse_whole(text.substr(slash + 1), 0, address_size(c.family) * 8);
    if (!prefix) {
        error = quoted(text.substr(slash + 1)) + " is not a prefix length (0.." +
                std::to_string(address_size(c.family) * 8) + ")";
        return std::nullopt;
    }
    c.prefix = static_cast<unsigned>(*prefix);
    // A subnet written with host bits is usually an interface address pasted by mistake; say
    // which subnet it would be instead of silently choosing it.
    if (clear_host_bits(c)) {
        error = quoted(text) + " has host bits set (the subnet is " + c.text() + ")";
        return std::nullopt;
    }
    return c;
}

Cidr subnet_of(int family, const void* address, const void* netmask) {
    Cidr c;
    c.family = family;
    const std::size_t n = address_size(family);
    std::memcpy(c.bytes.data(), address, n);
    const auto* mask = static_cast<const std::uint8_t*>(netmask);
    for (std::size_t i = 0; i < n; ++i) {
        c.prefix += static_cast<unsigned>(std::popcount(mask[i]));
        c.bytes[i] &= mask[i];
    }
    return c;
}

Cidr host_cidr(const sockaddr* address) {
    Cidr c;
    if (address->sa_family == AF_INET) {
        c.family = AF_INET;
        c.prefix = 32;
        std::memcpy(c.bytes.data(), &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, 4);
        return c;
    }
    const auto& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
        c.family = AF_INET;
        c.prefix = 32;
        std::memcpy(c.bytes.data(), v6.s6_addr + 12, 4);
        return c;
    }
    c.family = AF_INET6;
    c.prefix = 128;
    std::memcpy(c.bytes.data(), v6.s6_addr, 16);
    return c;
}

}  // namespace bmi::support::planes
