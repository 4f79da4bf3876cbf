// SPDX-License-Identifier: LGPL-2.1-or-later
// The CPU time this process has used, for tests that a wait sleeps rather than spins.
#pragma once

#include <sys/resource.h>

namespace bmi::test {

// CPU seconds of every thread of this process so far, user and system.
inline double process_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace bmi::test
