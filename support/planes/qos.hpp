// SPDX-License-Identifier: LGPL-2.1-or-later
// QoS levels an allocation may carry (pmix.alloc.netqos) and what the OS can do with them.
// libbmi enforces the levels it can map to a DiffServ code point: the standard class names
// (be, le, cs0-cs7, af11-af43, ef) and "dscp:N". Any other level is a name the fabric's own
// gear may understand; libbmi carries it but cannot enforce it, and says so (plane_binding).
#pragma once

#include <optional>
#include <string_view>

namespace bmi::support::planes {

// The DiffServ code point (0..63) of a level, or nullopt for a level libbmi cannot map.
std::optional<int> dscp_for_level(std::string_view level);

// What a socket gets for a code point: the TOS / traffic class byte (DSCP in its top six
// bits) and SO_PRIORITY (the class selector, capped at 6: 7 needs CAP_NET_ADMIN).
inline int tos_byte(int dscp) { return dscp << 2; }
inline int socket_priority(int dscp) { return (dscp >> 3) > 6 ? 6 : dscp >> 3; }
// An InfiniBand / RoCE service level (4 bits): the class selector.
inline int service_level(int dscp) { return dscp >> 3; }

}  // namespace bmi::support::planes
