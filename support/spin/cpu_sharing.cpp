// SPDX-License-Identifier: LGPL-2.1-or-later
// The yield probe; the reason is in the header.
#include "support/spin/cpu_sharing.hpp"

#include <sched.h>
#include <sys/resource.h>

namespace bmi::support {

namespace {
// Times this thread was switched away from its CPU so far. A yield that gives the CPU to
// another task counts as an involuntary switch.
long switches() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_nivcsw + usage.ru_nvcsw;
}
}  // namespace

std::chrono::microseconds cpu_shared() {
    return cpu_shared_around([] { sched_yield(); });
}

std::chrono::microseconds cpu_shared_around(void (*yield)()) {
    const long before = switches();
    const auto start = std::chrono::steady_clock::now();
    yield();
    const auto taken = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    if (taken <= cpu_shared_threshold) return std::chrono::microseconds{0};
    // A long yield that never left this thread was an interrupt or the hypervisor taking
    // the vCPU, not a task sharing our core: spinning on is right then.
    return switches() != before ? taken : std::chrono::microseconds{0};
}

}  // namespace bmi::support
