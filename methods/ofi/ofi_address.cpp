// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_address.hpp"

#include <unistd.h>

#include <atomic>

#include "support/method_address/method_address.hpp"

namespace bmi::method::ofi {

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

std::string host_of(const OfiAddress& address) {
    return address.has_port() ? address.node : std::string("localhost");
}

}  // namespace bmi::method::ofi
