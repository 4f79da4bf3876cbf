// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info's planes section: the planes this node is on and where each came from (an
// interface, an RDMA port, the node, or the inventory file BMI_INVENTORY names).
#pragma once

#include <ostream>
#include <string_view>

namespace bmi::info {

// False when the inventory file cannot be read or is malformed (the error names the file, the
// line and the field).
bool print_planes(std::ostream& out, std::string_view options);

// The allocation in force (BMI_ALLOCATION, BMI_ALLOCATION_FILE, BMI_ALLOCATION_ID or their
// options), each plane as this node binds it, and what is and is not enforced here. False when
// the allocation is malformed or cannot be bound here (the warning names the field).
bool print_allocation(std::ostream& out, std::string_view options);

}  // namespace bmi::info
