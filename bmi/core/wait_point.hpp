// SPDX-License-Identifier: LGPL-2.1-or-later
// The one kernel wait point of an instance: an epoll set holding every active method's wait fd
// plus an eventfd for wake-ups from other threads.
//
// Many threads may test at once. Only one of them (the leader) sleeps in epoll_wait; the others
// (followers) sleep on a condition variable. Every completion moves a sequence number, wakes
// the followers and writes the eventfd if the leader is asleep, so a waiter never sleeps past a
// completion it could use. When the leader wakes it gives up its seat, and a follower takes it.
//
// All of that state is one atomic word (sequence, leader's seat, number of followers), so the
// common cases cost one atomic instruction each: a completion that finds nobody asleep, taking
// the seat, and giving it up: a blocking ping-pong on one CPU sleeps for every message, so what
// a sleep costs in locked instructions is much of its user time (doc/perf/code-figures.md).
// The "no missed wake-up" argument: a waiter reads the sequence before checking for its
// completion, and takes the seat or counts itself as a follower only if the word still holds
// that sequence (one compare-and-swap); a signal moves the sequence and, in the same atomic
// instruction, learns who sleeps. One of the two always sees the other.
//
// Timeouts of sleeps that end early (traffic) come from a timerfd in the set, not from
// epoll_wait's own timeout, which arms and cancels a kernel timer on every sleep
// (doc/perf/code-figures.md, "Wait point"). The timerfd is re-armed only when it would ring
// after the sleeper's deadline or has rung; otherwise the sleep may end early (at an earlier
// caller's deadline), and the caller just sleeps again. Once a sleep has run out, the next one
// that would re-arm it uses epoll's timeout instead: an idle loop costs one system call a sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <type_traits>

#include <sys/epoll.h>

namespace bmi::core {

// What WaitPoint::wait runs on waking (WaitPoint::OnWake). It borrows the callable for the one
// wait() call it is passed to, where std::function would be built and called through on every
// sleep; never keep one beyond that call.
class WakeCallback {
public:
    WakeCallback() = default;
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, WakeCallback>>>
    WakeCallback(F&& f)  // implicit: callers pass a lambda
        : callable_(const_cast<void*>(static_cast<const void*>(&f))),
          call_([](void* callable, std::span<const epoll_event> events) {
              (*static_cast<std::remove_reference_t<F>*>(callable))(events);
          }) {}
    explicit operator bool() const { return call_ != nullptr; }
    void operator()(std::span<const epoll_event> events) const { call_(callable_, events); }

private:
    void* callable_ = nullptr;
    void (*call_)(void*, std::span<const epoll_event>) = nullptr;
};

class WaitPoint {
public:
    using Clock = std::chrono::steady_clock;
    // Run by the thread that slept in epoll_wait, with the ready events of the methods, before
    // the sequence moves (see wait()): in direct mode the method's own, in the shared set one
    // per readable method fd (data.fd).
    using OnWake = WakeCallback;

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
    // Direct mode (one active method whose epoll set took our eventfd and timerfd): the leader
    // sleeps on that set itself and hands its events to on_wake. -1 returns to the shared set.
    void set_direct(int method_epoll_fd);

    // The method fds of the shared set readable right now (one epoll_wait that sleeps not at
    // all and reads nothing; any thread). `all` when more were ready than fit.
    struct ReadyFds {
        static constexpr int capacity = 8;
        int fds[capacity];
        int count = 0;
        bool all = false;
        bool contains(int fd) const;
    };
    ReadyFds ready_fds() const;

    // Snapshot to pass to wait(): read it before checking whether the awaited thing happened.
    std::uint64_t sequence() const { return word_.load() >> sequence_shift; }
    // Sleeps until deadline or until something was signalled after `seen` was read; `now` is
    // the caller's latest clock reading (a sleep may end a few microseconds late, never
    // early). The thread that slept in epoll_wait runs on_wake, then gives up its seat and
    // moves the sequence in one step: a thread that prepared to sleep before on_wake undid
    // that preparation looks again instead of sleeping unprepared, and whatever on_wake
    // completed is announced by that same step. In direct mode, events are lost without an
    // on_wake.
    // True if this thread slept as the leader and left nothing for a progress pass: the ready
    // events went to on_wake, or (without one) no method's fd was readable.
    bool wait(std::uint64_t seen, Clock::time_point now, Clock::time_point deadline,
              const OnWake& on_wake = {});
    // Something completed: wake whoever sleeps.
    void signal();

private:
    // word_: bit 0 the leader's seat, then the followers, then the sequence.
    static constexpr std::uint64_t seat = 1;
    static constexpr std::uint64_t follower = 2;
    static constexpr int sequence_shift = 20;  // up to 2^19 - 1 followers
    static constexpr std::uint64_t followers_mask = (std::uint64_t{1} << sequence_shift) - 2;
    static constexpr std::uint64_t tick = std::uint64_t{1} << sequence_shift;

    // What a signal that moved the word from `old` must do for those asleep.
    void wake_sleepers(std::uint64_t old);
    void wait_as_follower(std::uint64_t seen, Clock::time_point deadline);
    bool wait_as_leader(Clock::time_point now, Clock::time_point deadline, const OnWake& on_wake);
    // The leader, about to sleep on the shared set: takes our fds out of the set of the method
    // that was direct before (set_direct(-1)).
    void leave_old_direct_set();
    // The leader, done with its wake-up (or unwinding from it).
    void leave_seat();
    // The timerfd will ring by `deadline`, and not before `now` (leader only).
    bool timer_covers(Clock::time_point now, Clock::time_point deadline) const;
    // Sets the timerfd to ring at `deadline` (leader only); false if it could not be set.
    bool arm_timer(Clock::time_point deadline);
    // epoll_wait with its own timeout, to the nanosecond where the kernel offers it.
    int sleep_with_timeout(int epoll_fd, epoll_event* events, int max, Clock::duration left);

    int epoll_fd_ = -1;
    int event_fd_ = -1;
    int timer_fd_ = -1;
    Clock::time_point armed_until_{};  // when the timerfd rings; only the leader touches it
    bool last_sleep_ran_out_ = false;  // the leader's last sleep ended at its deadline
    std::atomic<bool> no_pwait2_{false};
    std::atomic<int> direct_fd_{-1};
    std::atomic<int> left_direct_fd_{-1};  // the method set set_direct(-1) left, until cleaned
    std::atomic<std::uint64_t> word_{0};
    std::mutex followers_mutex_;  // only for the condition variable's sake
    std::condition_variable followers_;
};

}  // namespace bmi::core
