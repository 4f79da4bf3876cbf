// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info's RDMA section: devices and ports as libibverbs sees them.
#pragma once

#include <ostream>

namespace bmi::info {

// Lists every RDMA device and port (state, MTU, link layer, GID table size). Prints why not
// when libibverbs was absent at build time or finds no device. Returns the device count.
int print_rdma_devices(std::ostream& out);

}  // namespace bmi::info
