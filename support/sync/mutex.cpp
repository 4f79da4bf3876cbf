// SPDX-License-Identifier: LGPL-2.1-or-later
// The slow paths of support::Mutex: sleeping on the lock word and waking one sleeper.
#include "support/sync/mutex.hpp"

#include <climits>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bmi::support {

namespace {
void futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value) {
    // The lock word never leaves this process: the private futex skips the shared-mapping
    // lookup.
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value,
            nullptr, nullptr, 0);
}
}  // namespace

void Mutex::lock_contended() {
    // Mark the lock as wanted (2) and sleep until the holder's unlock finds the mark and wakes
    // us. Whoever takes it this way keeps the mark, which at worst costs one spare wake-up.
    while (word_.exchange(2, std::memory_order_acquire) != 0) futex(word_, FUTEX_WAIT, 2);
}

void Mutex::wake_one() { futex(word_, FUTEX_WAKE, 1); }

}  // namespace bmi::support
