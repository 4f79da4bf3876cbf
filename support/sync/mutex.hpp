// SPDX-License-Identifier: LGPL-2.1-or-later
// A mutex whose uncontended lock and unlock are one inline atomic instruction each: the control
// layer takes its locks several times per message, and std::mutex's calls into the C library
// showed in blocking ping-pongs (doc/perf/shm-notes.md). The classic three-state futex lock:
// 0 free, 1 held, 2 held and somebody may sleep on it; a contended lock sleeps in the kernel at
// once rather than spinning on the holder's CPU. Satisfies Lockable; MutexLock is the guard
// clang's thread-safety analysis understands.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>

#include "support/sync/thread_safety.hpp"

namespace bmi::support {

class BMI_CAPABILITY("mutex") Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() BMI_ACQUIRE() {
        std::uint32_t expected = 0;
        if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                           std::memory_order_relaxed))
            lock_contended();
    }
    bool try_lock() BMI_TRY_ACQUIRE(true) {
        std::uint32_t expected = 0;
        return word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                             std::memory_order_relaxed);
    }
    // For code the analysis cannot follow (a lambda called with the lock held): says, and in
    // debug builds checks, that somebody holds it.
    void assert_held() const BMI_ASSERT_CAPABILITY(this) {
        assert(word_.load(std::memory_order_relaxed) != 0);
    }
    void unlock() BMI_RELEASE() {
        if (word_.exchange(0, std::memory_order_release) == 2) wake_one();
    }

private:
    void lock_contended();
    void wake_one();

    std::atomic<std::uint32_t> word_{0};
};

// Holds a Mutex for its scope (std::lock_guard, which the analysis cannot see through).
class BMI_SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex& mutex) BMI_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
    ~MutexLock() BMI_RELEASE() { mutex_.unlock(); }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

private:
    Mutex& mutex_;
};

}  // namespace bmi::support
