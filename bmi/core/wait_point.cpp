// SPDX-License-Identifier: LGPL-2.1-or-later
// Leader/follower sleeping on one epoll set; the design is described in the header.
#include "bmi/core/wait_point.hpp"

#include <cerrno>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "support/error/error_map.hpp"

namespace bmi::core {

WaitPoint::WaitPoint(int& error) {
    error = 0;
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (epoll_fd_ < 0 || event_fd_ < 0 || timer_fd_ < 0) {
        error = support::bmi_error_from_errno(errno);
        return;
    }
    error = add_fd(event_fd_);
    if (error == 0) error = add_fd(timer_fd_);
}

WaitPoint::~WaitPoint() {
    if (timer_fd_ >= 0) close(timer_fd_);
    if (event_fd_ >= 0) close(event_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
}

int WaitPoint::add_fd(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        return support::bmi_error_from_errno(errno);
    return 0;
}

void WaitPoint::remove_fd(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

namespace {
// The wait point whose leader is running its on_wake on this thread (see signal()).
__attribute__((tls_model("initial-exec"))) thread_local const WaitPoint* waking_leader = nullptr;
}  // namespace

void WaitPoint::signal() {
    // The woken leader's own completions: giving up its seat right after on_wake moves the
    // sequence and wakes the followers anyway, so they cost no atomic instruction here.
    if (waking_leader == this) return;
    const std::uint64_t old = word_.fetch_add(tick);
    if ((old & (seat | followers_mask)) != 0) wake_sleepers(old);
}

void WaitPoint::wake_sleepers(std::uint64_t old) {
    if ((old & seat) != 0) {
        std::uint64_t one = 1;
        ssize_t ignored = write(event_fd_, &one, sizeof one);
        (void)ignored;
    }
    if ((old & followers_mask) != 0) {
        // Taking the mutex orders this wake-up after a follower's check of the word and before
        // its sleep, or after its sleep began; never in between.
        { std::lock_guard lock(followers_mutex_); }
        followers_.notify_all();
    }
}

namespace {
// epoll's own timeout for a sleep of `left`, used only where the timerfd cannot be set (a
// kernel out of memory); capped so the int cannot overflow.
int epoll_timeout_ms(WaitPoint::Clock::duration left) {
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return ms > 60000 ? 60000 : static_cast<int>(ms);
}
}  // namespace

bool WaitPoint::arm_timer(Clock::time_point now, Clock::time_point deadline) {
    // Armed for a moment still to come, and no later than we need: leave it (the common
    // case: a test loop whose every call allows the same idle time).
    if (armed_until_ > now && armed_until_ <= deadline) return true;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch())
                  .count();
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    // steady_clock is CLOCK_MONOTONIC. Setting the time also drops a count left from an
    // earlier ring, so a timerfd that rang while nobody slept stops being readable.
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr) != 0) return false;
    armed_until_ = deadline;
    return true;
}

void WaitPoint::set_direct(int method_epoll_fd) {
    direct_fd_.store(method_epoll_fd, std::memory_order_release);
    signal();  // a leader asleep on the old set must look again
}

void WaitPoint::wait(std::uint64_t seen, Clock::time_point now, Clock::time_point deadline,
                     const OnWake& on_wake) {
    std::uint64_t word = word_.load();
    std::uint64_t next;
    do {
        if ((word >> sequence_shift) != seen) return;  // something happened meanwhile
        next = (word & seat) != 0 ? word + follower : word | seat;
    } while (!word_.compare_exchange_weak(word, next));
    if ((word & seat) != 0)
        wait_as_follower(seen, deadline);
    else
        wait_as_leader(now, deadline, on_wake);
}

void WaitPoint::wait_as_follower(std::uint64_t seen, Clock::time_point deadline) {
    {
        // The leader will make progress and signal, or give up its seat (which also moves the
        // sequence).
        std::unique_lock lock(followers_mutex_);
        followers_.wait_until(lock, deadline,
                              [&] { return (word_.load() >> sequence_shift) != seen; });
    }
    word_.fetch_sub(follower);
}

void WaitPoint::wait_as_leader(Clock::time_point now, Clock::time_point deadline,
                               const OnWake& on_wake) {
    // The deadline is kept by the timerfd (-1: no epoll timeout); a deadline already past
    // only polls.
    int timeout_ms = 0;
    if (deadline > now)
        timeout_ms = arm_timer(now, deadline) ? -1 : epoll_timeout_ms(deadline - now);
    const int direct = direct_fd_.load(std::memory_order_acquire);
    epoll_event events[64];
    int n = epoll_wait(direct >= 0 ? direct : epoll_fd_, events, 64, timeout_ms);
    std::size_t handed = 0;  // the method's own events, moved to the front
    for (int i = 0; i < n; ++i) {
        const bool wake = direct >= 0 ? events[i].data.u64 == wake_tag
                                      : events[i].data.fd == event_fd_;
        const bool timer = direct >= 0 ? events[i].data.u64 == timer_tag
                                       : events[i].data.fd == timer_fd_;
        if (wake) {
            std::uint64_t count;
            ssize_t ignored = read(event_fd_, &count, sizeof count);
            (void)ignored;
        } else if (timer) {
            armed_until_ = {};  // rung: the next sleep arms it again, which also clears it
        } else if (direct >= 0) {
            events[handed++] = events[i];
        }
    }

    // Leaves the seat even if on_wake throws (a method out of memory): a seat kept for good
    // would turn every later sleeper into a follower that no readable fd can wake.
    struct LeaveSeat {
        WaitPoint& point;
        ~LeaveSeat() { point.leave_seat(); }
    } leave{*this};
    if (on_wake) {
        waking_leader = this;
        on_wake({events, handed});
    }
}

void WaitPoint::leave_seat() {
    waking_leader = nullptr;
    // Give up the seat and move the sequence in one step; a follower then takes the seat (or
    // sees that progress is now possible). The seat was ours: only followers need waking.
    const std::uint64_t old = word_.fetch_add(tick - seat);
    if ((old & followers_mask) != 0) wake_sleepers(old & ~seat);
}

}  // namespace bmi::core
