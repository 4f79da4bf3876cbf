// SPDX-License-Identifier: LGPL-2.1-or-later
// The poll spacing, measured once; the reason is in the header.
#include "support/spin/poll_spacing.hpp"

#include <algorithm>
#include <chrono>

namespace bmi::support {

namespace {

constexpr double target_spacing_ns = 30.0;
constexpr int max_pauses = 8;

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

int measure() {
    constexpr int rounds = 2000;  // well under a millisecond, once per process
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds; ++i) cpu_pause();
    double each =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        rounds;
    if (!(each > 0.5)) return 1;  // no pause instruction, or a clock too coarse to tell
    return std::clamp(static_cast<int>(target_spacing_ns / each + 0.5), 1, max_pauses);
}

}  // namespace

int pauses_per_poll() {
    static const int count = measure();
    return count;
}

void poll_pause() {
    for (int i = pauses_per_poll(); i > 0; --i) cpu_pause();
}

}  // namespace bmi::support
