// SPDX-License-Identifier: LGPL-2.1-or-later
// A bounded, adaptive busy-poll before a sleep. On this kind of machine a sleeping process takes
// 7-30 us to wake (measured in doc/PERFORMANCE.md: eventfd ping-pong, blocking TCP), far more
// than a reply from a busy peer takes to arrive, so a short poll wins when traffic flows. The
// budget doubles while polling pays off (or traffic is seen elsewhere: reward()) and halves each
// time it runs out, so a quiet peer soon costs no CPU; it never exceeds the configured cap.
#pragma once

#include <algorithm>
#include <chrono>

#include "support/spin/poll_spacing.hpp"

namespace bmi::support {

class AdaptiveSpin {
public:
    explicit AdaptiveSpin(int cap_us) : cap_us_(std::max(cap_us, 0)), budget_us_(cap_us_) {
        if (cap_us_ > 0) pauses_per_poll();  // measured here, not inside the first spin
    }

    // Calls poll() until it returns true or the budget is spent; true if it did.
    template <class Poll>
    bool run(Poll&& poll) {
        if (budget_us_ <= 0) return false;
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::microseconds(budget_us_);
        // Reading the clock costs about as much as a cheap poll, so look at it only every
        // polls_per_clock rounds: a poll that finds work sooner is what a spin is for.
        do {
            for (int i = 0; i < polls_per_clock; ++i) {
                if (poll()) {
                    reward();
                    return true;
                }
                poll_pause();
            }
        } while (std::chrono::steady_clock::now() < deadline);
        budget_us_ /= 2;
        return false;
    }

    // Traffic arrived: the next spin may be longer.
    void reward() { budget_us_ = std::min(cap_us_, budget_us_ * 2 + 1); }

    int budget_us() const { return budget_us_; }

private:
    static constexpr int polls_per_clock = 8;

    int cap_us_;
    int budget_us_;
};

}  // namespace bmi::support
