// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi address strings: "ofi+PROVIDER://REST". The provider word picks libfabric's provider;
// REST is what that provider's addresses look like to us: host:port for the providers on IP
// sockets, a name for shm, and for the others (efa, cxi, psm2, psm3, opx, ...) the provider's
// own address bytes in hex, or, to listen, the domain to open.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::method::ofi {

enum class AddressForm {
    host_port,  // "HOST:PORT": tcp, verbs, sockets, udp, net, usnic
    shm_name,   // "NAME": shm
    raw,        // "0xHEX": the bytes fi_getname wrote, as a server reports them
    domain,     // "" or "DOMAIN": listen where the provider picks, on that domain or its first
};

struct OfiAddress {
    std::string provider;  // the word after "ofi+": "tcp", "shm", "verbs", "efa", ...
    std::string rest;      // after "://"
    AddressForm form = AddressForm::host_port;
    std::string node;            // host of host:port, the shm name, or the domain ("" = first)
    std::string service;         // port of host:port, else ""
    std::vector<std::byte> raw;  // the provider's address bytes of the raw form

    // What fi_getinfo is asked for: "tcp" reaches RDM endpoints through ofi_rxm.
    std::string provider_hint() const;
    bool has_port() const { return form == AddressForm::host_port; }
    bool is_shm() const { return form == AddressForm::shm_name; }
};

// Whether the provider's endpoints are IP sockets, addressed as host:port. Inline: the control
// layer asks it of an allocated plane, also where the method is not built.
inline bool socket_addressed(std::string_view provider) {
    for (std::string_view word : {"tcp", "verbs", "sockets", "udp", "net", "usnic"})
        if (provider == word) return true;
    return false;
}

// shm endpoint names as libfabric takes them: "fi_ns://NAME" is used as given, where a bare
// name would get the user id and an endpoint index appended.
inline constexpr std::string_view shm_name_prefix = "fi_ns://";
std::string shm_endpoint_name(std::string_view name);
// A fresh endpoint name for a client of shm, unique on this host while the process lives.
std::string shm_client_name();

// The provider of an address that names none ("ofi://HOST:PORT").
inline constexpr std::string_view default_provider = "tcp";
// The prefix of the raw form, and the longest address it may carry (a hello's limit).
inline constexpr std::string_view raw_prefix = "0x";
inline constexpr std::size_t max_raw_bytes = 256;

// nullopt for a string that is not "ofi+PROVIDER://REST" (or "ofi://REST", default_provider)
// with a REST the provider takes. The domain form is for listening only (start refuses it
// as a lookup); a raw address of a socket provider is taken as its bytes.
std::optional<OfiAddress> parse_address(std::string_view text);

std::string format_address(std::string_view provider, std::string_view rest);
// "0x" and two lowercase hex digits a byte.
std::string format_raw(const std::vector<std::byte>& bytes);

// The host an address's endpoint is on, as the per-source bounds count it: host of host:port;
// for shm "localhost", since every shm endpoint is on this node, whatever name it chose; for a
// raw address the whole address, since only the provider knows which bytes name the node.
std::string host_of(const OfiAddress& address);
// host_of for a peer known by the endpoint string address_of_name wrote; the whole string if
// it does not parse.
std::string host_of_endpoint(const std::string& endpoint);

}  // namespace bmi::method::ofi
