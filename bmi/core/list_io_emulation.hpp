// SPDX-License-Identifier: LGPL-2.1-or-later
// List I/O for methods without native support: the control layer packs a send list into one
// contiguous bounce buffer before posting, and unpacks a receive's bounce buffer into the
// user's list when it completes. Only the totals of the two sides have to agree.
#pragma once

#include "bmi-types.h"

namespace bmi::core {

// Copies the list into a new malloc'd buffer of total bytes; nullptr when out of memory.
void* pack_list(const void* const* buffers, const bmi_size_t* sizes, int count, bmi_size_t total);
// Scatters the first `bytes` of packed into the list.
void unpack_list(const void* packed, bmi_size_t bytes, const void* const* buffers,
                 const bmi_size_t* sizes, int count);
// Sum of sizes, or -1 if count < 1, a size is negative, a buffer is null with size > 0, or the
// sum does not fit in 64 bits.
bmi_size_t list_total(const void* const* buffers, const bmi_size_t* sizes, int count);

}  // namespace bmi::core
