// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/plane.hpp"

#include <sys/socket.h>

#include <cstddef>
#include <iterator>

#include "support/planes/cidr.hpp"
#include "support/planes/text_fields.hpp"

namespace bmi::support::planes {

std::string_view to_string(PlaneType type) {
    switch (type) {
        case PlaneType::tcp:
            return "tcp";
        case PlaneType::shm:
            return "shm";
        case PlaneType::verbs:
            return "verbs";
        case PlaneType::ofi:
            return "ofi";
    }
    return "?";
}

namespace {
constexpr PlaneType all_types[] = {PlaneType::tcp, PlaneType::shm, PlaneType::verbs,
                                   PlaneType::ofi};
}  // namespace

std::optional<PlaneType> parse_plane_type(std::string_view text) {
    for (PlaneType t : all_types)
        if (text == to_string(t)) return t;
    return std::nullopt;
}

std::string plane_type_choices() {
    std::string out;
    for (std::size_t i = 0; i < std::size(all_types); ++i) {
        if (i > 0) out += i + 1 == std::size(all_types) ? " or " : ", ";
        out += to_string(all_types[i]);
    }
    return out;
}

namespace {
std::optional<std::string> verbs_identifier(std::string_view id, std::string& error) {
    // A '/' makes it a GID subnet prefix (fe80::/64); otherwise a device and maybe a port.
    if (id.find('/') != std::string_view::npos) {
        const auto cidr = parse_cidr(id, error);
        if (!cidr) return std::nullopt;
        if (cidr->family != AF_INET6) {
            error = "a GID subnet prefix is an IPv6 CIDR, not ";
            error += quoted(id);
            return std::nullopt;
        }
        return cidr->text();
    }
    const std::size_t colon = id.find(':');
    const std::string_view device = id.substr(0, colon);
    if (!is_name(device)) {
        error = quoted(device) + " is not an RDMA device name";
        return std::nullopt;
    }
    if (colon != std::string_view::npos && !parse_whole(id.substr(colon + 1), 1, 255)) {
        error = quoted(id.substr(colon + 1)) + " is not a port number (1..255)";
        return std::nullopt;
    }
    return std::string(id);
}

std::optional<std::string> ofi_identifier(std::string_view id, std::string& error) {
    const std::size_t slash = id.find('/');
    std::string provider(id.substr(0, slash));
    for (char& c : provider)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    // A layered name ("tcp;ofi_rxm") is the method's choice, not the site's: planes name the
    // core provider.
    if (!is_name(provider) || provider.find('.') != std::string::npos) {
        error = quoted(id.substr(0, slash)) + " is not a libfabric provider name";
        return std::nullopt;
    }
    if (slash == std::string_view::npos) return provider;
    const std::string_view domain = id.substr(slash + 1);
    if (!is_name(domain)) {
        error = quoted(domain) + " is not a libfabric domain name";
        return std::nullopt;
    }
    return provider + "/" + std::string(domain);
}
}  // namespace

std::optional<std::string> canonical_identifier(PlaneType type, std::string_view identifier,
                                                std::string& error) {
    switch (type) {
        case PlaneType::tcp: {
            const auto cidr = parse_cidr(identifier, error);
            if (!cidr) return std::nullopt;
            return cidr->text();
        }
        case PlaneType::verbs:
            return verbs_identifier(identifier, error);
        case PlaneType::shm:
            if (!is_name(identifier)) {
                error = quoted(identifier) + " is not a host name";
                return std::nullopt;
            }
            return std::string(identifier);
        case PlaneType::ofi:
            return ofi_identifier(identifier, error);
    }
    return std::nullopt;
}

}  // namespace bmi::support::planes
