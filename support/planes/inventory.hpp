// SPDX-License-Identifier: LGPL-2.1-or-later
// The inventory: an admin's file that names planes and pins them, one per line,
//     storage = tcp 10.20.0.0/16 ports=32000-32999 bw=10000 qos=bulk,fast
//     fabric  = verbs mlx5_0:1
// The fields after the identifier are what an allocator may hand out on that plane: a tcp
// port pool, a bandwidth in Mbit/s, the QoS levels it offers. Parsing is strict: a malformed
// line fails the whole file with an error naming the file, the line and the field.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/planes/plane.hpp"
#include "support/planes/port_ranges.hpp"
#include "support/planes/text_fields.hpp"

namespace bmi::support::planes {

struct InventoryPlane {
    Plane plane;                   // name and origin ("inventory <source>:<line>") set
    PortRanges ports;              // empty: no pool (tcp allocations on it fail)
    double bandwidth_mbps = 0;     // 0: not stated (any bandwidth is granted as a cap)
    std::vector<std::string> qos;  // empty: the plane offers no QoS levels
};

struct Inventory {
    std::vector<InventoryPlane> planes;
    // The plane with this name, or else this identifier; nullptr when none.
    const InventoryPlane* find(std::string_view name_or_identifier) const;
};

// `source` names the text in errors (the file's path, or an environment variable's name).
std::optional<Inventory> parse_inventory(std::string_view text, std::string_view source,
                                         ParseError& error);

}  // namespace bmi::support::planes
