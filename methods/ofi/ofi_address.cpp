// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_address.hpp"

#include <unistd.h>

#include <atomic>

#include "support/method_address/method_address.hpp"

namespace bmi::method::ofi {

namespace {
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// "0xHEX" with a whole number of bytes, at least one and at most max_raw_bytes.
std::optional<std::vector<std::byte>> parse_raw(std::string_view rest) {
    rest.remove_prefix(raw_prefix.size());
    if (rest.empty() || rest.size() % 2 != 0 || rest.size() / 2 > max_raw_bytes)
        return std::nullopt;
    std::vector<std::byte> bytes(rest.size() / 2);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const int high = hex_digit(rest[2 * i]);
        const int low = hex_digit(rest[2 * i + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        bytes[i] = static_cast<std::byte>(high * 16 + low);
    }
    return bytes;
}

// A domain is one word of a provider's domain names ("cxi0", "rdmap0s31-rdm", "mlx5_0").
bool domain_word(std::string_view rest) {
    return rest.find_first_of("/:, ") == std::string_view::npos;
}
}  // namespace

std::string OfiAddress::provider_hint() const {
    // tcp and verbs give connected endpoints only; ofi_rxm makes them reliable datagrams.
    if (provider == "tcp" || provider == "verbs") return provider + ";ofi_rxm";
    return provider;
}

std::optional<OfiAddress> parse_address(std::string_view text) {
    auto parts = support::split_scheme(text);
    if (!parts || parts->scheme != "ofi") return std::nullopt;
    OfiAddress out;
    // A bare "ofi://HOST:PORT" is tcp: the provider every node has, and the form Mercury's
    // na_bmi builds for a protocol named "ofi" in the standalone dialect's method list.
    out.provider = parts->variant.empty() ? std::string(default_provider)
                                          : std::string(parts->variant);
    out.rest = std::string(parts->rest);
    if (out.provider == "shm") {
        if (out.rest.empty() || out.rest.find_first_of("/: ") != std::string::npos)
            return std::nullopt;
        out.form = AddressForm::shm_name;
        out.node = out.rest;
        return out;
    }
    if (parts->rest.starts_with(raw_prefix)) {
        auto raw = parse_raw(parts->rest);
        if (!raw) return std::nullopt;
        out.form = AddressForm::raw;
        out.raw = std::move(*raw);
        return out;
    }
    if (!socket_addressed(out.provider)) {
        if (!domain_word(out.rest)) return std::nullopt;
        out.form = AddressForm::domain;
        out.node = out.rest;
        return out;
    }
    auto host_port = support::parse_host_port(parts->rest);
    if (!host_port) return std::nullopt;
    out.node = host_port->host;
    out.service = std::to_string(host_port->port);
    return out;
}

std::string shm_endpoint_name(std::string_view name) {
    return std::string(shm_name_prefix) + std::string(name);
}

std::string shm_client_name() {
    static std::atomic<unsigned> next{0};
    return "bmi-" + std::to_string(getpid()) + "-" + std::to_string(next++);
}

std::string format_address(std::string_view provider, std::string_view rest) {
    return "ofi+" + std::string(provider) + "://" + std::string(rest);
}

std::string format_raw(const std::vector<std::byte>& bytes) {
    constexpr std::string_view digits = "0123456789abcdef";
    std::string out(raw_prefix);
    out.reserve(raw_prefix.size() + 2 * bytes.size());
    for (std::byte b : bytes) {
        const auto value = std::to_integer<unsigned>(b);
        out += digits[value >> 4];
        out += digits[value & 15];
    }
    return out;
}

std::string host_of(const OfiAddress& address) {
    switch (address.form) {
        case AddressForm::host_port:
            return address.node;
        case AddressForm::shm_name:
            return "localhost";
        case AddressForm::raw:
        case AddressForm::domain:
            break;
    }
    return address.rest;
}

std::string host_of_endpoint(const std::string& endpoint) {
    auto parsed = parse_address(endpoint);
    return parsed ? host_of(*parsed) : endpoint;
}

}  // namespace bmi::method::ofi
