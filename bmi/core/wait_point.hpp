// SPDX-License-Identifier: LGPL-2.1-or-later
// The one kernel wait point of an instance: an epoll set holding every active method's wait fd
// plus an eventfd for wake-ups from other threads.
//
// Many threads may test at once. Only one of them (the leader) sleeps in epoll_wait; the others
// (followers) sleep on a condition variable. Every completion bumps a sequence number and wakes
// all followers, and writes the eventfd if the leader is asleep, so a waiter never sleeps past
// a completion it could use. When the leader's time is up it hands leadership to a follower.
// The "no missed wake-up" argument: a waiter reads the sequence number before checking for its
// completion and sleeps only while the number is unchanged. A signal bumps the number and then
// looks whether anybody sleeps; a waiter counts itself as a sleeper and then looks at the
// number (both sequentially consistent), so one of the two always sees the other. A signal
// that finds no sleeper, the common case while threads are busy, takes no lock.
//
// Timeouts come from a timerfd in the set, not from epoll_wait's own timeout: that one arms
// and cancels a kernel timer on every sleep, which costs as much as the rest of a wake-up
// (one CPU, eventfd ping-pong through epoll: 1.19-1.21 us one way with a timeout, 1.03-1.04
// without, 1.02-1.03 with a blocking read). The timerfd is re-armed only when it would ring
// after the sleeper's deadline or has rung; otherwise the sleep may end early (at an earlier
// caller's deadline), and the caller just sleeps again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>

#include <sys/epoll.h>

namespace bmi::core {

class WaitPoint {
public:
    using Clock = std::chrono::steady_clock;

    // Sets error to -BMI_E* if the kernel objects could not be made.
    explicit WaitPoint(int& error);
    ~WaitPoint();
    WaitPoint(const WaitPoint&) = delete;
    WaitPoint& operator=(const WaitPoint&) = delete;

    int add_fd(int fd);
    void remove_fd(int fd);

    // What identifies our eventfd and our timerfd inside a method's epoll set in direct mode.
    static constexpr std::uint64_t wake_tag = ~std::uint64_t{0};
    static constexpr std::uint64_t timer_tag = wake_tag - 1;
    int wake_fd() const { return event_fd_; }
    int timer_fd() const { return timer_fd_; }
    // Direct mode (one active method whose epoll set took our eventfd and timerfd): the leader sleeps on
    // that set itself and hands its events to the method. -1 returns to the shared set.
    void set_direct(int method_epoll_fd);

    // Snapshot to pass to wait(): read it before checking whether the awaited thing happened.
    std::uint64_t sequence() const;
    // Sleeps until deadline or until something was signalled after `seen` was read; `now` is
    // the caller's latest clock reading (a sleep may end a few microseconds late, never
    // early). In direct
    // mode returns the method's ready events (stored in out), else 0. A thread that slept in
    // epoll_wait calls on_wake before it gives up its seat; giving it up then counts as an
    // event (the sequence moves), so a thread that prepared to sleep before on_wake undid that
    // preparation looks again instead of sleeping unprepared.
    int wait(std::uint64_t seen, Clock::time_point now, Clock::time_point deadline,
             std::span<epoll_event> out,
             const std::function<void()>& on_wake = {});
    // Something completed: wake whoever sleeps.
    void signal();

private:
    // Makes sure the timerfd rings at `deadline` at the latest (leader only); false if it
    // could not be set.
    bool arm_timer(Clock::time_point now, Clock::time_point deadline);

    int epoll_fd_ = -1;
    int event_fd_ = -1;
    int timer_fd_ = -1;
    Clock::time_point armed_until_{};  // when the timerfd rings; only the leader touches it
    std::atomic<int> direct_fd_{-1};
    std::mutex wait_mutex_;
    std::condition_variable followers_;
    std::atomic<std::uint64_t> sequence_{0};
    std::atomic<int> sleepers_{0};  // the leader and the followers inside wait()
    bool leader_asleep_ = false;    // guarded by wait_mutex_
};

}  // namespace bmi::core
