// SPDX-License-Identifier: LGPL-2.1-or-later
// The planes this node is on, as its interfaces show them: one tcp plane per IPv4/IPv6 subnet
// of an interface that is up (getifaddrs), one verbs plane per RDMA device port (libibverbs,
// when built with the verbs option and the library loads at run time), one ofi plane per
// libfabric provider and domain that offers tagged reliable datagrams (when built with the ofi
// option and libfabric loads), and the node's own shm plane. Reads interfaces, nothing else.
#pragma once

#include <string>
#include <vector>

#include "support/planes/plane.hpp"

namespace bmi::support::planes {

// In the order found; a subnet two interfaces share is listed once, with the first interface.
std::vector<Plane> discover_planes();

// True when this process can see RDMA devices: libibverbs was found at build time and loads
// now. Otherwise `why` (if given) says which of the two is missing.
bool discovers_verbs(std::string* why);

}  // namespace bmi::support::planes
