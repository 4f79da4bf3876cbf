// SPDX-License-Identifier: LGPL-2.1-or-later
// How an instance waits when its provider's completion queue has no wait descriptor (shm):
// nothing would wake a sleep, and polling without end holds a core. So before a sleep it spins
// on the queue for a bounded, adaptive time (support/spin/adaptive_spin.hpp), then naps on a
// timerfd in the method's epoll set; each nap that finds nothing doubles the next one, up to
// ofi_nap_us, and traffic starts over from the shortest. An idle server costs a wake-up per
// nap; a message to it waits at most one nap.
#pragma once

#include <chrono>

#include "support/spin/adaptive_spin.hpp"

namespace bmi::method::ofi {

class Polling {
public:
    Polling(int spin_us, int nap_us);
    ~Polling();
    Polling(const Polling&) = delete;
    Polling& operator=(const Polling&) = delete;

    // Adds the nap timer to `epoll_fd`; 0 or -BMI_E*. Only an instance that polls calls it.
    int start(int epoll_fd);
    bool started() const { return timer_fd_ >= 0; }

    // Before a sleep: spins on poll() (true when it moved something). True if it did; else the
    // nap is armed and the caller may sleep.
    template <class Poll>
    bool before_sleep(Poll&& poll) {
        if (spin_.run(poll)) {
            traffic();
            return true;
        }
        return !arm();
    }
    // Something moved outside the spin: the next wait spins longer and naps short.
    void traffic();
    // Consumes a nap that ended, so the epoll set stops reporting it.
    void clear();

    static constexpr std::chrono::microseconds first_nap{50};

private:
    // False if the timer could not be set: the caller must poll again rather than sleep.
    bool arm();

    support::AdaptiveSpin spin_;
    const std::chrono::microseconds longest_;
    std::chrono::microseconds next_ = first_nap;
    int timer_fd_ = -1;
    bool armed_ = false;
};

}  // namespace bmi::method::ofi
