// SPDX-License-Identifier: LGPL-2.1-or-later
// Which way a large message travels, learned from the receiver's own timings.
//
// Two paths can carry a message above the eager limit, the split copy (both processes,
// process_vm_readv/writev) and streaming through the ring, and which one is faster depends on the
// machine, not on anything the library can read off it (the two VMs of doc/PERFORMANCE.md disagree:
// doc/perf/code-figures.md, "Split or stream"). So the receiver, which picks the path
// (shm_protocol.cpp, start_transfer), times both per power-of-two size class and keeps taking the
// faster, trying the other now and then in case the machine changed.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "bmi-types.h"

namespace bmi::method::shm {

enum class LargePath : std::uint8_t { split = 0, stream = 1 };

// Power-of-two size classes: class k holds the sizes of bit width k, [2^(k-1), 2^k); 64 cover
// any bmi_size_t.
inline constexpr std::size_t size_classes = 64;

const char* path_name(LargePath path);
constexpr LargePath other_path(LargePath path) {
    return path == LargePath::split ? LargePath::stream : LargePath::split;
}

// The clock transfers are timed with; never 0, which marks an untimed transfer.
inline std::uint64_t monotonic_ns() {
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    return static_cast<std::uint64_t>(
               std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()) |
           1;
}

class PathChoice {
public:
    // Timings kept per path and size class; the estimate is the smallest. Nothing makes a
    // transfer faster than the path allows, but much makes one slower, and lands on
    // whichever path is in use: first touches of fresh buffers (the first messages of a
    // size), a timer tick or a preemption. A mean or even a median of the in-use path's
    // timings drifted up, against the other path's older ones, and the two traded places
    // every few messages.
    static constexpr std::uint32_t window = 5;
    // Samples a path needs in a size class before the choice trusts it. Fresh buffers make
    // the first two messages of a size slow on either path (doc/perf/code-figures.md), so it
    // takes three.
    static constexpr std::uint32_t warm_samples = 3;
    // Once both paths are warm, every explore_every-th pick goes to the slower one, so an
    // estimate that has gone stale (other load, other placement) gets corrected; the price
    // is one message in that many on the slower path. Until the slower path has a full
    // window of timings, every explore_early-th: its first ones are often from the cold
    // start of the size, and would otherwise keep it out for a long time.
    static constexpr std::uint32_t explore_every = 16;
    static constexpr std::uint32_t explore_early = 4;
    // A size class that has not timed both paths takes the one its nearest class that has
    // (the lower on a tie) prefers, and tries the other only every explore_leaned-th message
    // until that one is warm too: near sizes rarely disagree, and a run that walks up the
    // sizes would otherwise send several messages of each new size down the path the last
    // size already found slower. Rarer than explore_every: the first transfers of a path into
    // buffers it has not touched run cold, far slower than warm ones (doc/perf/shm-malloc.md),
    // so a short run of a size should not pay for one.
    static constexpr std::uint32_t explore_leaned = 64;

    // The path for the next message of size bytes (size > 0).
    LargePath pick(bmi_size_t size);
    // A message of size bytes took nanoseconds from match to completion on path. Returns
    // true when this sample changed which path the size class prefers.
    bool record(LargePath path, bmi_size_t size, std::uint64_t nanoseconds);
    // The current estimate in nanoseconds per byte; 0 while the path has no sample.
    double cost(LargePath path, bmi_size_t size) const;
    // The path the size class would take if it did not explore.
    LargePath preferred(bmi_size_t size) const;
    // The size class of size (size_classes).
    static std::size_t class_of(bmi_size_t size);

private:
    struct Estimate {
        std::array<float, window> ns_per_byte{};  // the last samples, oldest overwritten
        std::uint32_t samples = 0;                // filled entries, at most window
        std::uint32_t next = 0;                   // the entry the next sample overwrites
        double best() const;
    };
    struct SizeClass {
        std::array<Estimate, 2> paths{};
        std::uint32_t picks = 0;
    };
    static LargePath faster(const SizeClass& c);
    static bool warm(const SizeClass& c);
    // Sets lean to the path the nearest class that timed both prefers; false if none has.
    bool neighbour_lean(std::size_t k, LargePath& lean) const;

    std::array<SizeClass, size_classes> classes_{};
};

}  // namespace bmi::method::shm
