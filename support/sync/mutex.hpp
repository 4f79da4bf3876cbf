// SPDX-License-Identifier: LGPL-2.1-or-later
// A mutex whose uncontended lock and unlock are one inline atomic instruction each.
//
// The control layer takes its state lock and a method's lock about ten times per message and
// side. std::mutex spends some 55 instructions per lock and unlock pair in calls into the C
// library (type checks, elision and robust-list bookkeeping we never use); with a thread that
// sleeps for every message, as in a blocking ping-pong on one CPU, that was a sixth of the
// user time. This one is the classic three-state futex lock: 0 free, 1 held, 2 held and
// somebody may sleep on it. A contended lock sleeps in the kernel at once instead of spinning,
// which would only burn the time slice of the holder's CPU when both share one.
// Satisfies Lockable, so lock_guard, unique_lock and try_to_lock work with it; ThreadSanitizer
// sees its acquire and release orderings like any other atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace bmi::support {

class Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() {
        std::uint32_t expected = 0;
        if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                           std::memory_order_relaxed))
            lock_contended();
    }
    bool try_lock() {
        std::uint32_t expected = 0;
        return word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                             std::memory_order_relaxed);
    }
    void unlock() {
        if (word_.exchange(0, std::memory_order_release) == 2) wake_one();
    }

private:
    void lock_contended();
    void wake_one();

    std::atomic<std::uint32_t> word_{0};
};

}  // namespace bmi::support
