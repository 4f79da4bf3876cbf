// SPDX-License-Identifier: LGPL-2.1-or-later
// A bounded, adaptive busy-poll before a sleep. A sleeping process takes far longer to wake
// (doc/perf/code-figures.md, "Adaptive spin") than a reply from a busy peer takes to arrive, so
// a short poll wins when traffic flows. The budget doubles while polling pays off (or traffic is
// seen elsewhere: reward()) and halves each time it runs out, so a quiet peer soon costs no CPU;
// it never exceeds the configured cap.
//
// Polling pays only on a core of our own. A spin that has not succeeded within probe_after yields
// the CPU once (cpu_sharing.hpp): if another task took it, our peer or a neighbour shares the core,
// so we stop spinning for a while (backoff, doubling while the sharing lasts) and sleep at once
// instead, which is what both of us need then. A probe costs what the other task kept: a peer
// answering gives the CPU back within microseconds, a CPU-bound neighbour only at the end of its
// turn (milliseconds: doc/perf/code-figures.md). So the backoff is also long enough that the probes
// cost at most about backoff_cost of each wait. The probe runs after a failed spin, after a
// backoff, and every probe_interval spins otherwise, so a spin that keeps winning on its own core
// rarely pays the system call.
#pragma once

#include <algorithm>
#include <chrono>

#include "support/spin/cpu_sharing.hpp"
#include "support/spin/poll_spacing.hpp"

namespace bmi::support {

class AdaptiveSpin {
public:
    // shared: the probe (cpu_shared, or a stand-in where a test decides the answer).
    using Probe = std::chrono::microseconds (*)();
    explicit AdaptiveSpin(int cap_us, Probe shared = cpu_shared)
        : cap_us_(std::max(cap_us, 0)), budget_us_(cap_us_), shared_(shared) {
        if (cap_us_ > 0) pauses_per_poll();  // measured here, not inside the first spin
    }

    // Calls poll() until it returns true or the budget is spent; true if it did.
    template <class Poll>
    bool run(Poll&& poll) {
        if (backoff_left_ > 0) {
            if (--backoff_left_ == 0) {
                budget_us_ = std::max(budget_us_, 1);  // try again, and look first
                probe_next_ = true;
            }
            return false;
        }
        if (budget_us_ <= 0) return false;
        // Counts up to the interval and stays there until a probe runs: spins that keep winning
        // within probe_after never probe, and a bare counter would overflow in hours of them.
        if (since_probe_ < probe_interval) ++since_probe_;
        bool probe = probe_next_ || since_probe_ >= probe_interval;
        // Reading the clock costs about as much as a cheap poll, so look at it only every
        // polls_per_clock rounds, and first after one round: a poll that finds work that soon
        // (an shm reply from another core) is what a spin is for, and then reads no clock.
        const auto round = [&] {
            for (int i = 0; i < polls_per_clock; ++i) {
                if (poll()) {
                    probe_next_ = false;
                    reward();
                    return true;
                }
                poll_pause();
            }
            return false;
        };
        if (round()) return true;
        const auto start = std::chrono::steady_clock::now();
        const auto deadline = start + std::chrono::microseconds(budget_us_);
        for (auto now = start;; now = std::chrono::steady_clock::now()) {
            if (probe && (now - start >= probe_after || now >= deadline)) {
                probe = false;
                since_probe_ = 0;
                if (const auto taken = shared_(); taken.count() > 0) {
                    back_off(taken);
                    return poll();  // what the task we yielded to may have sent us
                }
                backoff_ = min_backoff;  // a core of our own (again)
            }
            if (now >= deadline) break;
            if (round()) return true;
        }
        budget_us_ /= 2;
        probe_next_ = true;
        return false;
    }

    // Traffic arrived: the next spin may be longer (not while the core is shared).
    void reward() {
        if (backoff_left_ == 0) budget_us_ = std::min(cap_us_, budget_us_ * 2 + 1);
    }

    // reward() would change something now: whoever rewards a quick sleep needs to time it
    // only then: a clock reading is not free (doc/perf/code-figures.md, "The wait's clock").
    bool rewardable() const { return backoff_left_ == 0 && budget_us_ < cap_us_; }

    int budget_us() const { return budget_us_; }
    // Spins left out because the last probe found the core shared.
    int backoff_left() const { return backoff_left_; }

    static constexpr auto probe_after = std::chrono::microseconds(2);
    static constexpr int probe_interval = 16;
    static constexpr int min_backoff = 64;
    static constexpr int max_backoff = 1 << 16;
    static constexpr auto backoff_cost = std::chrono::microseconds(1);

private:
    static constexpr int polls_per_clock = 8;

    void back_off(std::chrono::microseconds taken) {
        const auto amortised =
            static_cast<int>(std::min<long long>(taken / backoff_cost, max_backoff));
        backoff_left_ = std::max(backoff_, amortised);
        backoff_ = std::min(backoff_left_ * 2, max_backoff);
        budget_us_ = 0;
        probe_next_ = false;
    }

    int cap_us_;
    int budget_us_;
    Probe shared_;
    int backoff_ = min_backoff;  // the next backoff's length, in spins
    int backoff_left_ = 0;
    int since_probe_ = 0;
    bool probe_next_ = false;  // the last spin failed, or a backoff just ended
};

}  // namespace bmi::support
