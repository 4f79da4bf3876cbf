// SPDX-License-Identifier: LGPL-2.1-or-later
// The pace at which the ofi method's backlog tries the provider again after -FI_EAGAIN. rxm
// answers -FI_EAGAIN for as long as it dials a peer, and redials one that refused, so retrying
// on every test call would let the application's loop set the pace of those dials: after a
// refusal the backlog waits, `first` at first and twice as long after each refusal in a row, up
// to `longest`. A post that goes through, the provider's wait descriptor waking (a dial may be
// done) and a backlog that starts again from empty each end the wait.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "methods/kit/deadlines.hpp"

namespace bmi::method::ofi {

class RetryPause {
public:
    using Clock = kit::Deadlines::Clock;  // its timer wakes a sleeping caller for a retry
    static constexpr Clock::duration first = std::chrono::microseconds(50);
    static constexpr Clock::duration longest = std::chrono::milliseconds(50);

    // Whether a retry may run now; completions just read allow one regardless (a full queue
    // has room again), which the caller decides.
    bool due(Clock::time_point now) const { return now >= retry_at_; }

    // The provider refused at `now`: the time of the next retry, to arm a timer for, or
    // nothing when a pause already runs (the refusal was a retry between pauses).
    std::optional<Clock::time_point> refused(Clock::time_point now) {
        if (now < retry_at_) return std::nullopt;
        pause_ = pause_ == Clock::duration{} ? first : std::min(2 * pause_, longest);
        retry_at_ = now + pause_;
        return retry_at_;
    }

    // Something was posted: the next refusal starts from the shortest pause.
    void posted() { pause_ = {}; }

    // The provider's descriptor woke the sleep: retry at the next pass.
    void woken() { retry_at_ = {}; }

    // The backlog was empty: a pause grown on a peer whose backlog has gone is not this one's.
    void restart() {
        pause_ = {};
        retry_at_ = {};
    }

    Clock::duration pause() const { return pause_; }

private:
    Clock::duration pause_{};
    Clock::time_point retry_at_{};
};

}  // namespace bmi::method::ofi
