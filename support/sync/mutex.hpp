// SPDX-License-Identifier: LGPL-2.1-or-later
// A mutex whose uncontended lock and unlock are one inline atomic instruction each: the control
// layer takes its locks several times per message, and std::mutex's calls into the C library
// showed in blocking ping-pongs (doc/perf/shm-notes.md). The classic three-state futex lock:
// 0 free, 1 held, 2 held and somebody may sleep on it; a contended lock sleeps in the kernel at
// once rather than spinning on the holder's CPU. Satisfies Lockable; MutexLock is the guard
// clang's thread-safety analysis understands.
//
// A mutex built with Bias::first_thread costs its first locking thread no atomic instruction
// at all while no other thread has touched it: that thread marks its hold with plain stores,
// and the first other thread to lock revokes the bias once, with a barrier on every thread of
// the process (membarrier), after which the mutex is the futex lock above for every thread.
// Most BMI callers post and test from one thread (doc/architecture.md, "One thread's locks").
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>

#include "support/sync/thread_safety.hpp"
#include "support/sync/thread_token.hpp"

namespace bmi::support {

class BMI_CAPABILITY("mutex") Mutex {
public:
    enum class Bias { none, first_thread };

    explicit Mutex(Bias bias = Bias::none)
        : mode_(bias == Bias::none ? mode_plain : mode_biased),
          owner_(bias == Bias::none ? &no_owner : nullptr) {}
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() BMI_ACQUIRE() {
        if (owner_.load(std::memory_order_relaxed) == this_thread_token() && enter_biased()) return;
        if (mode_.load(std::memory_order_acquire) != mode_plain &&
            settle_bias(true) == Settled::claimed && enter_biased())
            return;
        std::uint32_t expected = 0;
        if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                           std::memory_order_relaxed))
            lock_contended();
    }
    bool try_lock() BMI_TRY_ACQUIRE(true) {
        if (owner_.load(std::memory_order_relaxed) == this_thread_token()) {
            if (biased_hold_.load(std::memory_order_relaxed) != 0) return false;
            if (enter_biased()) return true;
        }
        if (mode_.load(std::memory_order_acquire) != mode_plain) {
            const Settled settled = settle_bias(false);
            if (settled == Settled::claimed && enter_biased()) return true;
            if (settled == Settled::busy) return false;
        }
        std::uint32_t expected = 0;
        return word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                             std::memory_order_relaxed);
    }
    // For code the analysis cannot follow (a lambda called with the lock held): says, and in
    // debug builds checks, that somebody holds it.
    void assert_held() const BMI_ASSERT_CAPABILITY(this) {
        assert(word_.load(std::memory_order_relaxed) != 0 ||
               biased_hold_.load(std::memory_order_relaxed) != 0);
    }
    void unlock() BMI_RELEASE() {
        // Nobody takes the lock word while the bias stands, so a free word means the caller
        // (its owner) holds the mutex by its bias.
        if (word_.load(std::memory_order_relaxed) == 0) {
            leave_biased();
            return;
        }
        if (word_.exchange(0, std::memory_order_release) == 2) wake_one();
    }

    // Whether the bias still stands (a mutex built without one: false). For tests.
    bool bias_stands() const { return mode_.load(std::memory_order_acquire) == mode_biased; }

private:
    // mode_: plain (no bias, or revoked and settled), biased (the owner, once claimed, locks
    // with plain stores), revoking (another thread asked; the owner may still be inside).
    static constexpr std::uint32_t mode_plain = 0, mode_biased = 1, mode_revoking = 2;

    // The owner's lock: marks the hold, then looks whether the bias still stands. The compiler
    // may not swap the two; the processor may, which the revoker's membarrier covers.
    bool enter_biased() {
        biased_hold_.store(1, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (mode_.load(std::memory_order_acquire) == mode_biased) return true;
        leave_biased();
        return false;
    }
    void leave_biased() {
        biased_hold_.store(0, std::memory_order_release);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (mode_.load(std::memory_order_relaxed) == mode_revoking) finish_revocation();
    }
    // The slow half while the mode is not plain: claims a fresh mutex for the calling thread,
    // or revokes the bias and, if wait, waits until the owner is out (busy: it is not yet).
    enum class Settled { plain, claimed, busy };
    Settled settle_bias(bool wait);
    void finish_revocation();
    void lock_contended();
    void wake_one();

    std::atomic<std::uint32_t> word_{0};
    std::atomic<std::uint32_t> mode_;
    std::atomic<std::uint32_t> biased_hold_{0};  // the owner holds it by its bias
    // The thread the bias serves: none yet, then the first to lock, then no thread once the
    // bias is gone, so that the old owner's lock goes straight to the lock word.
    std::atomic<const void*> owner_{nullptr};
    static inline const char no_owner = 0;
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
