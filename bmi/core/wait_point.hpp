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

    // What identifies our eventfd inside a method's epoll set in direct mode.
    static constexpr std::uint64_t wake_tag = ~std::uint64_t{0};
    int wake_fd() const { return event_fd_; }
    // Direct mode (one active method whose epoll set took our eventfd): the leader sleeps on
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
    int epoll_fd_ = -1;
    int event_fd_ = -1;
    std::atomic<int> direct_fd_{-1};
    std::mutex wait_mutex_;
    std::condition_variable followers_;
    std::atomic<std::uint64_t> sequence_{0};
    std::atomic<int> sleepers_{0};  // the leader and the followers inside wait()
    bool leader_asleep_ = false;    // guarded by wait_mutex_
};

}  // namespace bmi::core
