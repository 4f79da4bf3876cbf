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

bool WaitPoint::timer_covers(Clock::time_point now, Clock::time_point deadline) const {
    // Armed for a moment still to come, and no later than we need (the common case: a test
    // loop whose every call allows the same idle time).
    return armed_until_ > now && armed_until_ <= deadline;
}

bool WaitPoint::arm_timer(Clock::time_point deadline) {
    auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    // steady_clock is CLOCK_MONOTONIC. Setting the time also drops a count left from an
    // earlier ring, so a timerfd that rang while nobody slept stops being readable.
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr) != 0) return false;
    armed_until_ = deadline;
    return true;
}

int WaitPoint::sleep_with_timeout(int epoll_fd, epoll_event* events, int max,
                                  Clock::duration left) {
    if (!no_pwait2_.load(std::memory_order_relaxed)) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        const int n = epoll_pwait2(epoll_fd, events, max, &timeout, nullptr);
        if (n >= 0 || errno != ENOSYS) return n;
        no_pwait2_.store(true, std::memory_order_relaxed);  // a kernel before 5.11
    }
    return epoll_wait(epoll_fd, events, max, epoll_timeout_ms(left));
}

bool WaitPoint::ReadyFds::contains(int fd) const {
    if (all) return true;
    for (int i = 0; i < count; ++i)
        if (fds[i] == fd) return true;
    return false;
}

WaitPoint::ReadyFds WaitPoint::ready_fds() const {
    // Our eventfd and timerfd are in the set too; room for them and every method.
    epoll_event events[ReadyFds::capacity + 2];
    ReadyFds ready;
    const int n = epoll_wait(epoll_fd_, events, ReadyFds::capacity + 2, 0);
    for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == event_fd_ || fd == timer_fd_) continue;
        if (ready.count == ReadyFds::capacity) {
            ready.all = true;
            break;
        }
        ready.fds[ready.count++] = fd;
    }
    // A failed look (no memory) must not hide work: then every method gets its full pass.
    if (n < 0) ready.all = true;
    return ready;
}

void WaitPoint::set_direct(int method_epoll_fd) {
    const int old = direct_fd_.exchange(method_epoll_fd, std::memory_order_acq_rel);
    if (method_epoll_fd < 0 && old >= 0) left_direct_fd_.store(old, std::memory_order_release);
    signal();  // a leader asleep on the old set must look again
}

void WaitPoint::leave_old_direct_set() {
    // Our fds stay in the method's set until no sleep there can need them: taken out while
    // the leader still slept on it, a wake-up already queued could be lost. Now the caller is
    // the leader and sleeps on the shared set, where the method's fd would otherwise also be
    // readable for our own timer and wake-ups.
    const int old = left_direct_fd_.exchange(-1, std::memory_order_acq_rel);
    if (old < 0) return;
    epoll_ctl(old, EPOLL_CTL_DEL, event_fd_, nullptr);
    epoll_ctl(old, EPOLL_CTL_DEL, timer_fd_, nullptr);
}

bool WaitPoint::wait(std::uint64_t seen, Clock::time_point now, Clock::time_point deadline,
                     const OnWake& on_wake) {
    std::uint64_t word = word_.load();
    std::uint64_t next;
    do {
        if ((word >> sequence_shift) != seen) return false;  // something happened meanwhile
        next = (word & seat) != 0 ? word + follower : word | seat;
    } while (!word_.compare_exchange_weak(word, next));
    if ((word & seat) == 0) return wait_as_leader(now, deadline, on_wake);
    wait_as_follower(seen, deadline);
    return false;
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

bool WaitPoint::wait_as_leader(Clock::time_point now, Clock::time_point deadline,
                               const OnWake& on_wake) {
    const int direct = direct_fd_.load(std::memory_order_acquire);
    if (direct < 0) leave_old_direct_set();
    const int epoll_fd = direct >= 0 ? direct : epoll_fd_;
    epoll_event events[64];
    int n;
    if (deadline <= now) {
        n = epoll_wait(epoll_fd, events, 64, 0);  // a deadline already past only polls
    } else if (timer_covers(now, deadline)) {
        n = epoll_wait(epoll_fd, events, 64, -1);
    } else if (last_sleep_ran_out_ || !arm_timer(deadline)) {
        // An idle caller's sleeps run out one after another, each needing the timerfd set
        // anew: epoll's own timeout then saves that system call per sleep.
        n = sleep_with_timeout(epoll_fd, events, 64, deadline - now);
    } else {
        n = epoll_wait(epoll_fd, events, 64, -1);
    }
    std::size_t handed = 0;  // the method's own events, moved to the front
    bool woken = false;      // by the eventfd or a method's fd, not by the timer
    bool method_ready = false;
    for (int i = 0; i < n; ++i) {
        const bool wake = direct >= 0 ? events[i].data.u64 == wake_tag
                                      : events[i].data.fd == event_fd_;
        const bool timer = direct >= 0 ? events[i].data.u64 == timer_tag
                                       : events[i].data.fd == timer_fd_;
        if (wake) {
            std::uint64_t count;
            ssize_t ignored = read(event_fd_, &count, sizeof count);
            (void)ignored;
            woken = true;
        } else if (timer) {
            // Consumed, so that a sleep on epoll's own timeout is not woken by it again.
            std::uint64_t count;
            ssize_t ignored = read(timer_fd_, &count, sizeof count);
            (void)ignored;
            armed_until_ = {};
        } else {
            woken = true;
            method_ready = true;
            events[handed++] = events[i];
        }
    }
    last_sleep_ran_out_ = n >= 0 && !woken && deadline > now;

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
    // on_wake got what the sleep found; without it, a sleep on the shared set that found a
    // method readable leaves that for a progress pass.
    return n >= 0 && (on_wake || !method_ready);
}

void WaitPoint::leave_seat() {
    waking_leader = nullptr;
    // Give up the seat and move the sequence in one step; a follower then takes the seat (or
    // sees that progress is now possible). The seat was ours: only followers need waking.
    const std::uint64_t old = word_.fetch_add(tick - seat);
    if ((old & followers_mask) != 0) wake_sleepers(old & ~seat);
}

}  // namespace bmi::core
