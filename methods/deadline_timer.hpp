// SPDX-License-Identifier: LGPL-2.1-or-later
// A one-shot timerfd that goes off at the earliest deadline it was asked for. Arming for a
// later time than the one pending does nothing; a timer that goes off for a deadline that no
// longer matters costs its owner one look, so it is never disarmed by hand.
#pragma once

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace bmi::method {

class DeadlineTimer {
public:
    using Clock = std::chrono::steady_clock;

    // fd: a CLOCK_MONOTONIC timerfd the owner created and watches.
    void attach(int fd) { fd_ = fd; }

    void arm_by(Clock::time_point at) {
        if (fd_ < 0 || at >= armed_at_) return;
        armed_at_ = at;
        // A zero it_value would disarm the timer: a deadline already due fires at once.
        const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(at - Clock::now());
        const long long ns = std::max<long long>(wait.count(), 1);
        itimerspec when{};
        when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        timerfd_settime(fd_, 0, &when, nullptr);
    }

    // Call when the fd is readable: consumes the expiry; nothing is armed afterwards.
    void went_off() {
        std::uint64_t expirations = 0;
        [[maybe_unused]] ssize_t n = read(fd_, &expirations, sizeof expirations);
        armed_at_ = Clock::time_point::max();
    }

private:
    int fd_ = -1;
    Clock::time_point armed_at_ = Clock::time_point::max();
};

}  // namespace bmi::method
