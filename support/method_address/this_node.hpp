// SPDX-License-Identifier: LGPL-2.1-or-later
// Whether a host name or address names this machine: a loopback address, or an address of one
// of its interfaces. Resolves the name, so it may block as long as the resolver does: call it
// outside every lock.
#pragma once

#include <string>

namespace bmi::support {

bool names_this_node(const std::string& host);

}  // namespace bmi::support
