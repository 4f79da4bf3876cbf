// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/memory/return_memory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace bmi::support {

void MemoryReturner::maybe_return() {
    if (pending_ < threshold_) return;
    pending_ = 0;
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

}  // namespace bmi::support
