// SPDX-License-Identifier: LGPL-2.1-or-later
// The yield probe; the reason is in the header.
#include "support/spin/cpu_sharing.hpp"

#include <sched.h>

namespace bmi::support {

std::chrono::microseconds cpu_shared() {
    const auto start = std::chrono::steady_clock::now();
    sched_yield();
    const auto taken = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    return taken > cpu_shared_threshold ? taken : std::chrono::microseconds{0};
}

}  // namespace bmi::support
