// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi address strings: "ofi+PROVIDER://REST". The provider word picks libfabric's provider;
// REST is what that provider's addresses look like to us (host:port for tcp and verbs, a name
// for shm).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace bmi::method::ofi {

struct OfiAddress {
    std::string provider;  // the word after "ofi+": "tcp", "shm", "verbs", "efa", ...
    std::string rest;      // after "://"
    std::string node;      // host of host:port, or the shm name
    std::string service;   // port of host:port ("" for shm)

    // What fi_getinfo is asked for: "tcp" reaches RDM endpoints through ofi_rxm.
    std::string provider_hint() const;
    // Whether `rest` is host:port (every provider but shm).
    bool has_port() const { return !service.empty(); }
};

// shm endpoint names as libfabric takes them: "fi_ns://NAME" is used as given, where a bare
// name would get the user id and an endpoint index appended.
inline constexpr std::string_view shm_name_prefix = "fi_ns://";
std::string shm_endpoint_name(std::string_view name);
// A fresh endpoint name for a client of shm, unique on this host while the process lives.
std::string shm_client_name();

// The provider of an address that names none ("ofi://HOST:PORT").
inline constexpr std::string_view default_provider = "tcp";

// nullopt for a string that is not "ofi+PROVIDER://REST" (or "ofi://REST", default_provider)
// with a REST the provider takes.
std::optional<OfiAddress> parse_address(std::string_view text);

std::string format_address(std::string_view provider, std::string_view rest);

// The host an address's endpoint is on, as the per-source bounds count it: host of host:port;
// for shm "localhost", since every shm endpoint is on this node, whatever name it chose.
std::string host_of(const OfiAddress& address);

}  // namespace bmi::method::ofi
