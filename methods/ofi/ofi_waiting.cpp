// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_waiting.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "bmi-types.h"

namespace bmi::method::ofi {

Waiting::Waiting(int spin_us, int transfer_spin_us, int nap_us)
    : short_(spin_us),
      transfer_(transfer_spin_us > 0 ? transfer_spin_us : spin_us),
      longest_(std::max(std::chrono::microseconds(nap_us), first_nap)) {}

Waiting::~Waiting() {
    if (timer_fd_ >= 0) close(timer_fd_);
}

int Waiting::start_naps(int epoll_fd, std::uint64_t tag) {
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) return -BMI_ENOMEM;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer_fd_, &event) != 0) return -BMI_ENOMEM;
    return 0;
}

void Waiting::after_wake() {
    // "Soon" allows for the wake-up itself on both ends of a round trip, as tcp's does.
    if (sleep_start_ != std::chrono::steady_clock::time_point{} &&
        std::chrono::steady_clock::now() - sleep_start_ < 4 * last_->cap)
        last_->spin.reward();
    sleep_start_ = {};
}

void Waiting::traffic() {
    last_->spin.reward();
    next_ = first_nap;
    fresh_traffic_ = true;
}

bool Waiting::yield_instead() {
    // A nap cannot end when the reply comes, only when its timer does: while traffic flows the
    // peer may be runnable on this very core, and yielding lets it answer at once.
    const auto now = std::chrono::steady_clock::now();
    if (fresh_traffic_) {
        yield_until_ = now + longest_;
        fresh_traffic_ = false;
    }
    if (now >= yield_until_) return false;
    sched_yield();
    return true;
}

void Waiting::clear() {
    if (!armed_) return;
    std::uint64_t expirations = 0;
    if (read(timer_fd_, &expirations, sizeof expirations) == sizeof expirations) armed_ = false;
}

bool Waiting::arm() {
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(next_.count() / 1'000'000);
    when.it_value.tv_nsec = static_cast<long>(next_.count() % 1'000'000 * 1000);
    // Re-arming resets the timer's expiration count: a nap that ended unread is forgotten.
    if (timerfd_settime(timer_fd_, 0, &when, nullptr) != 0) return false;
    armed_ = true;
    ++naps_taken_;
    next_ = std::min(next_ * 2, longest_);
    return true;
}

}  // namespace bmi::method::ofi
