// SPDX-License-Identifier: LGPL-2.1-or-later
// WaitPoint: a signal wakes the leader (in epoll) and followers (on the condition variable),
// a sequence change before sleeping means no sleep, readiness of an added fd wakes the leader.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <new>
#include <thread>
#include <vector>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bmi/core/wait_point.hpp"

using bmi::core::WaitPoint;
using namespace std::chrono_literals;

namespace {
// Waits with the snapshot `seen` for at most `limit`; returns how long the call took.
WaitPoint::Clock::duration sleep_from(WaitPoint& wp, std::uint64_t seen,
                                      WaitPoint::Clock::duration limit,
                                      const WaitPoint::OnWake& on_wake = {}) {
    auto start = WaitPoint::Clock::now();
    wp.wait(seen, start, start + limit, on_wake);
    return WaitPoint::Clock::now() - start;
}

// The same with a fresh snapshot.
WaitPoint::Clock::duration sleep_for(WaitPoint& wp, WaitPoint::Clock::duration limit) {
    return sleep_from(wp, wp.sequence(), limit);
}
}  // namespace

TEST_CASE("a signal after the snapshot means wait returns at once") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    auto seen = wp.sequence();
    wp.signal();
    REQUIRE(sleep_from(wp, seen, 20s) < 5s);
}

TEST_CASE("the wait ends at its deadline when nothing happens") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(sleep_for(wp, 30ms) >= 30ms);
}

TEST_CASE("signal wakes a leader and followers sleeping at once") {
    int error = 0;
    WaitPoint wp(error);
    constexpr int sleepers = 4;
    std::vector<std::thread> threads;
    std::vector<WaitPoint::Clock::duration> slept(sleepers);
    auto seen = wp.sequence();
    for (int i = 0; i < sleepers; ++i) {
        threads.emplace_back(
            [&, i] { slept[static_cast<std::size_t>(i)] = sleep_from(wp, seen, 20s); });
    }
    std::this_thread::sleep_for(50ms);  // let them fall asleep; correctness does not depend on it
    wp.signal();
    for (auto& t : threads) t.join();
    for (auto d : slept) REQUIRE(d < 10s);
}

namespace {
// Sleeps for at most `limit` while another thread makes an fd in the set readable after 30 ms;
// returns how long it slept. Only a leader (in epoll_wait) sees the fd.
WaitPoint::Clock::duration sleep_until_fd_readable(WaitPoint& wp,
                                                   WaitPoint::Clock::duration limit) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(wp.add_fd(fd) == 0);
    std::thread poke([fd] {
        std::this_thread::sleep_for(30ms);
        std::uint64_t one = 1;
        REQUIRE(write(fd, &one, sizeof one) == sizeof one);
    });
    auto slept = sleep_for(wp, limit);
    poke.join();
    wp.remove_fd(fd);
    close(fd);
    return slept;
}
}  // namespace

TEST_CASE("a readable method fd wakes the leader") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    REQUIRE(sleep_until_fd_readable(wp, 20s) < 10s);
}

TEST_CASE("the sleeping thread runs on_wake, and a snapshot from before it never sleeps") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    // Taken before the leader wakes, as by a thread that armed its peers' wake-ups which the
    // leader's on_wake then undid: that thread must look again, not sleep unarmed.
    auto before = wp.sequence();
    int woke = 0;
    auto count = [&](std::span<const epoll_event>) { ++woke; };  // outlives each wait
    sleep_from(wp, wp.sequence(), 20ms, count);
    REQUIRE(woke == 1);
    REQUIRE(sleep_from(wp, before, 20s, count) < 5s);
    REQUIRE(woke == 1);  // returned without sleeping, so no on_wake either
}

// Deadlines are kept by one timerfd that is re-armed only when needed (wait_point.hpp).
namespace {
// Sleeps until `deadline` from now, woken by another thread's signal after `delay` (long
// enough for the sleep to have armed the timer); returns how long it slept.
WaitPoint::Clock::duration sleep_until_signalled(WaitPoint& wp, WaitPoint::Clock::duration deadline,
                                                 WaitPoint::Clock::duration delay) {
    auto seen = wp.sequence();
    std::thread poke([&] {
        std::this_thread::sleep_for(delay);
        wp.signal();
    });
    auto slept = sleep_from(wp, seen, deadline);
    poke.join();
    return slept;
}
}  // namespace

TEST_CASE("a sleep with an earlier deadline than the armed timer still ends at its own") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    // The first sleep arms the timer 10 s ahead and is woken early by a signal.
    REQUIRE(sleep_until_signalled(wp, 10s, 20ms) < 5s);
    // The second one wants 50 ms: the timer must be brought forward, not left at 10 s.
    auto slept = sleep_for(wp, 50ms);
    REQUIRE(slept >= 50ms);
    REQUIRE(slept < 5s);
}

TEST_CASE("a timer that rang while nobody slept does not cut the next sleep short") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    // Armed for 20 ms, but the sleep ends early by a signal ...
    sleep_until_signalled(wp, 20ms, 5ms);
    // ... so the timer rings with nobody asleep, and stays readable.
    std::this_thread::sleep_for(60ms);
    REQUIRE(sleep_for(wp, 100ms) >= 100ms);
}

TEST_CASE("completions the leader signals during its own on_wake do not cut its next sleep short") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    // The woken leader completes something, as progress does in on_wake: that must not write
    // the eventfd, or the next sleep would end at once.
    sleep_from(wp, wp.sequence(), 10ms, [&](auto) { wp.signal(); });
    REQUIRE(sleep_for(wp, 60ms) >= 60ms);
}

TEST_CASE("a follower wakes when the leader's sleep ends, without any signal") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    auto seen = wp.sequence();
    std::atomic<bool> leader_done{false};
    std::thread leader([&] {
        sleep_from(wp, seen, 100ms);
        leader_done = true;
    });
    std::this_thread::sleep_for(30ms);  // the leader holds the seat by now (not required)
    auto waited = sleep_from(wp, seen, 20s);
    leader.join();
    REQUIRE(leader_done);
    REQUIRE(waited < 5s);
}

TEST_CASE("a leader whose on_wake throws still leaves its seat") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    REQUIRE_THROWS_AS(sleep_from(wp, wp.sequence(), 10ms, [](auto) { throw std::bad_alloc(); }),
                      std::bad_alloc);
    // This thread signals normally again ...
    auto seen = wp.sequence();
    wp.signal();
    REQUIRE(wp.sequence() != seen);
    // ... and the next sleeper is a leader in epoll_wait, so a readable fd wakes it (a follower
    // would sleep on until its deadline).
    REQUIRE(sleep_until_fd_readable(wp, 5s) < 3s);
}

namespace {
// A method's own epoll set holding the wait point's two fds, as Method::accept_wake_fd adds them.
int method_set_with(WaitPoint& wp) {
    int set = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = WaitPoint::wake_tag;
    epoll_ctl(set, EPOLL_CTL_ADD, wp.wake_fd(), &ev);
    ev.data.u64 = WaitPoint::timer_tag;
    epoll_ctl(set, EPOLL_CTL_ADD, wp.timer_fd(), &ev);
    return set;
}
}  // namespace

TEST_CASE("idle sleeps that run out one after another each last their whole time") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    // From the second one on they sleep on epoll's own timeout instead of the timerfd.
    for (int i = 0; i < 5; ++i) {
        auto slept = sleep_for(wp, 20ms);
        CHECK(slept >= 20ms);
        CHECK(slept < 5s);
    }
    // And a signal still ends such a sleep at once.
    REQUIRE(sleep_until_signalled(wp, 10s, 20ms) < 5s);
}

TEST_CASE("a sleep says whether it left anything for a progress pass") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    auto start = WaitPoint::Clock::now();
    CHECK(wp.wait(wp.sequence(), start, start + 10ms));  // ran out, no method fd readable
    int method_fd = eventfd(1, EFD_CLOEXEC);             // a method with work
    REQUIRE(wp.add_fd(method_fd) == 0);
    start = WaitPoint::Clock::now();
    CHECK_FALSE(wp.wait(wp.sequence(), start, start + 10s));
    wp.remove_fd(method_fd);
    close(method_fd);
    // A snapshot already stale: no sleep, so nothing was looked at.
    auto seen = wp.sequence();
    wp.signal();
    start = WaitPoint::Clock::now();
    CHECK_FALSE(wp.wait(seen, start, start + 10s));
}

TEST_CASE("in direct mode a sleep hands over what it found and needs no poll after it") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    const int set = method_set_with(wp);
    wp.set_direct(set);
    auto start = WaitPoint::Clock::now();
    wp.wait(wp.sequence(), start, start);  // takes the wake-up set_direct wrote
    start = WaitPoint::Clock::now();
    std::size_t handed = 99;
    CHECK(
        wp.wait(wp.sequence(), start, start + 10ms, [&](auto events) { handed = events.size(); }));
    CHECK(handed == 0);
    wp.set_direct(-1);
    close(set);
}

TEST_CASE("a leader asleep in direct mode wakes when the direct mode ends") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    const int set = method_set_with(wp);
    wp.set_direct(set);
    auto seen = wp.sequence();
    std::thread ender([&] {
        std::this_thread::sleep_for(30ms);
        wp.set_direct(-1);
    });
    auto slept = sleep_from(wp, seen, 10s);
    ender.join();
    CHECK(slept < 5s);
    close(set);
}

TEST_CASE("leaving direct mode takes our fds out of the method's set") {
    int error = 0;
    WaitPoint wp(error);
    REQUIRE(error == 0);
    const int set = method_set_with(wp);
    wp.set_direct(set);
    wp.set_direct(-1);
    sleep_for(wp, 1ms);  // the next leader on the shared set cleans up
    // Otherwise our own timer would make the method look readable in the shared set.
    CHECK(epoll_ctl(set, EPOLL_CTL_DEL, wp.timer_fd(), nullptr) != 0);
    CHECK(errno == ENOENT);
    CHECK(epoll_ctl(set, EPOLL_CTL_DEL, wp.wake_fd(), nullptr) != 0);
    close(set);
}
