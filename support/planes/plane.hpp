// SPDX-License-Identifier: LGPL-2.1-or-later
// A plane: one isolated network, named by a type and an identifier that is the same on every
// node even where interface names differ (SPEC §4, RFC0030). tcp planes are IP subnets (CIDR),
// verbs planes are an RDMA device[:port] or a GID subnet prefix, the shm plane is the node, an
// ofi plane is a libfabric provider and optionally its domain (the fabric a site names).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bmi::support::planes {

enum class PlaneType : std::uint8_t { tcp, shm, verbs, ofi };

std::string_view to_string(PlaneType type);
std::optional<PlaneType> parse_plane_type(std::string_view text);
// The types parse_plane_type takes, for error messages: "tcp, shm, verbs or ofi".
std::string plane_type_choices();

struct Plane {
    PlaneType type = PlaneType::tcp;
    std::string identifier;  // "10.20.0.0/16", "mlx5_0:1", "fe80::/64", "node7", "cxi/cxi0"
    std::string name;        // the inventory's name for it ("storage"); "" when unnamed
    std::string origin;      // where it came from: "interface eth0", "inventory f:3", ...
};

// The identifier as this library writes it, or nullopt with `error` saying what is wrong:
//   tcp    a CIDR with no host bits set ("10.20.0.0/16", "fd00:1::/64"), lower-cased;
//   verbs  device[:port] (port 1..255) or an IPv6 CIDR for a GID subnet prefix;
//   shm    a host name;
//   ofi    provider[/domain] ("tcp", "verbs/mlx5_0", "cxi/cxi0"), the provider lower-cased.
std::optional<std::string> canonical_identifier(PlaneType type, std::string_view identifier,
                                                std::string& error);

}  // namespace bmi::support::planes
