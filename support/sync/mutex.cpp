// SPDX-License-Identifier: LGPL-2.1-or-later
// The slow paths of support::Mutex: sleeping on the lock word and waking one sleeper, and
// claiming and revoking a bias.
#include "support/sync/mutex.hpp"

#include <climits>
#include <ctime>

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bmi::support {

namespace {
void futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value,
           const timespec* timeout = nullptr) {
    // The lock word never leaves this process: the private futex skips the shared-mapping
    // lookup.
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value,
            timeout, nullptr, 0);
}

long membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

// A bias needs the expedited process-wide barrier; a kernel or sandbox without it leaves every
// mutex plain. Registered once per process.
bool barrier_available() {
    static const bool available = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
                                  membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
    return available;
}

// Every running thread of this process passes a full barrier before this returns: the owner
// either sees the new mode or has made its hold visible.
void barrier_on_every_thread() {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
        membarrier(MEMBARRIER_CMD_GLOBAL);  // slower, needs no registration
}
}  // namespace

void Mutex::lock_contended() {
    // Mark the lock as wanted (2) and sleep until the holder's unlock finds the mark and wakes
    // us. Whoever takes it this way keeps the mark, which at worst costs one spare wake-up.
    while (word_.exchange(2, std::memory_order_acquire) != 0) futex(word_, FUTEX_WAIT, 2);
}

void Mutex::wake_one() { futex(word_, FUTEX_WAKE, 1); }

Mutex::Settled Mutex::settle_bias(bool wait) {
    const void* me = this_thread_token();
    std::uint32_t mode = mode_.load(std::memory_order_acquire);
    if (mode == mode_biased) {
        const void* owner = owner_.load(std::memory_order_acquire);
        if (owner == nullptr) {
            if (!barrier_available()) {
                if (owner_.compare_exchange_strong(owner, &no_owner, std::memory_order_acq_rel))
                    mode_.store(mode_plain, std::memory_order_release);
                return Settled::plain;
            }
            if (owner_.compare_exchange_strong(owner, me, std::memory_order_acq_rel))
                return Settled::claimed;
        }
        if (owner == me) return Settled::claimed;
        if (mode_.compare_exchange_strong(mode, mode_revoking, std::memory_order_acq_rel)) {
            barrier_on_every_thread();
            if (biased_hold_.load(std::memory_order_acquire) == 0) {
                finish_revocation();
                return Settled::plain;
            }
            // The owner is inside; its unlock sees the new mode and finishes the revocation.
        }
        mode = mode_.load(std::memory_order_acquire);
    }
    if (mode == mode_revoking) {
        if (owner_.load(std::memory_order_relaxed) == me) {
            // The owner is outside (it is locking), and from now on never enters by its bias.
            finish_revocation();
            return Settled::plain;
        }
        if (!wait) return Settled::busy;
        // The timeout only bounds a sleep that missed its wake-up; the loop looks again.
        const timespec nap{0, 1000000};
        while (mode_.load(std::memory_order_acquire) == mode_revoking)
            futex(mode_, FUTEX_WAIT, mode_revoking, &nap);
    }
    return Settled::plain;
}

void Mutex::finish_revocation() {
    owner_.store(&no_owner, std::memory_order_relaxed);
    mode_.store(mode_plain, std::memory_order_release);
    futex(mode_, FUTEX_WAKE, INT_MAX);
}

}  // namespace bmi::support
