// SPDX-License-Identifier: LGPL-2.1-or-later
// The kit's deadline engine: the order deadlines come due in, cancelling and moving them, many
// of them, and its real timerfd going off at the earliest (one already past at once) without
// being set again while deadlines only move later.
#include <catch2/catch.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <unordered_map>
#include <vector>

#include "methods/kit/deadlines.hpp"

using namespace bmi::method::kit;
using namespace std::chrono_literals;
using Clock = Deadlines::Clock;

namespace {

DeadlineKey key(std::uint64_t id, DeadlineKind kind = DeadlineKind::stall) { return {id, kind}; }

// The ids run_due calls for, in call order.
std::vector<std::uint64_t> due_ids(Deadlines& d, Clock::time_point now) {
    std::vector<std::uint64_t> ids;
    d.run_due(now, [&](DeadlineKey k, Clock::time_point) { ids.push_back(k.id); });
    return ids;
}

bool readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
}

}  // namespace

TEST_CASE("deadlines come due earliest first, and only once they are due") {
    Deadlines d;
    const auto t0 = Clock::now();
    d.schedule(key(3), t0 + 30ms);
    d.schedule(key(1), t0 + 10ms);
    d.schedule(key(4), t0 + 40ms);
    d.schedule(key(2), t0 + 20ms);
    CHECK(due_ids(d, t0).empty());
    CHECK(due_ids(d, t0 + 20ms) == std::vector<std::uint64_t>{1, 2});
    CHECK(d.size() == 2);
    CHECK(due_ids(d, t0 + 1h) == std::vector<std::uint64_t>{3, 4});
    CHECK(d.size() == 0);
    CHECK(due_ids(d, t0 + 2h).empty());
}

TEST_CASE("one id keeps one deadline per kind") {
    Deadlines d;
    const auto t0 = Clock::now();
    d.schedule(key(7, DeadlineKind::setup), t0 + 10ms);
    d.schedule(key(7, DeadlineKind::stall), t0 + 20ms);
    std::vector<DeadlineKind> kinds;
    d.run_due(t0 + 1s, [&](DeadlineKey k, Clock::time_point) { kinds.push_back(k.kind); });
    CHECK(kinds == std::vector<DeadlineKind>{DeadlineKind::setup, DeadlineKind::stall});
}

TEST_CASE("a cancelled deadline never comes due") {
    Deadlines d;
    const auto t0 = Clock::now();
    d.schedule(key(1), t0 + 10ms);
    d.schedule(key(2), t0 + 20ms);
    d.schedule(key(2, DeadlineKind::setup), t0 + 20ms);
    d.schedule(key(3), t0 + 30ms);
    d.cancel(key(2));
    d.cancel(key(9));  // never scheduled: nothing
    CHECK(d.size() == 3);
    d.cancel_all(2);
    CHECK_FALSE(d.when(key(2, DeadlineKind::setup)));
    CHECK(due_ids(d, t0 + 1s) == std::vector<std::uint64_t>{1, 3});
}

TEST_CASE("a deadline moved earlier or later comes due once, at its new time") {
    Deadlines d;
    const auto t0 = Clock::now();
    d.schedule(key(1), t0 + 10ms);
    d.schedule(key(1), t0 + 50ms);  // later
    d.schedule(key(2), t0 + 40ms);
    d.schedule(key(2), t0 + 5ms);  // earlier
    CHECK(*d.when(key(1)) == t0 + 50ms);
    CHECK(due_ids(d, t0 + 10ms) == std::vector<std::uint64_t>{2});
    CHECK(due_ids(d, t0 + 49ms).empty());
    CHECK(due_ids(d, t0 + 50ms) == std::vector<std::uint64_t>{1});
    CHECK(due_ids(d, t0 + 1h).empty());

    SECTION("schedule_by moves a deadline only earlier") {
        d.schedule_by(key(5), t0 + 30ms);
        d.schedule_by(key(5), t0 + 60ms);
        CHECK(*d.when(key(5)) == t0 + 30ms);
        d.schedule_by(key(5), t0 + 20ms);
        CHECK(*d.when(key(5)) == t0 + 20ms);
    }
}

TEST_CASE("what a due deadline's handler schedules and cancels counts at once") {
    Deadlines d;
    const auto t0 = Clock::now();
    d.schedule(key(1), t0 + 10ms);
    d.schedule(key(2), t0 + 20ms);
    d.schedule(key(3), t0 + 30ms);
    std::vector<std::uint64_t> ids;
    d.run_due(t0 + 1s, [&](DeadlineKey k, Clock::time_point now) {
        ids.push_back(k.id);
        if (k.id == 1) d.cancel(key(2));         // due in this batch: not called
        if (k.id == 3) d.schedule(key(3), now);  // due again: next time, not in this loop
    });
    CHECK(ids == std::vector<std::uint64_t>{1, 3});
    CHECK(due_ids(d, t0 + 1s) == std::vector<std::uint64_t>{3});
}

TEST_CASE("many deadlines, moved and cancelled at random, come due in order") {
    Deadlines d;
    const auto t0 = Clock::now();
    std::mt19937_64 random(37);
    constexpr std::uint64_t count = 20000;
    std::vector<Clock::time_point> expected(count);
    std::vector<bool> cancelled(count, false);
    for (std::uint64_t id = 0; id < count; ++id) {
        expected[id] = t0 + std::chrono::microseconds(random() % 10'000'000);
        d.schedule(key(id), expected[id]);
    }
    for (int i = 0; i < 200000; ++i) {
        const std::uint64_t id = random() % count;
        if (random() % 8 == 0) {
            d.cancel(key(id));
            cancelled[id] = true;
        } else {
            expected[id] = t0 + std::chrono::microseconds(random() % 10'000'000);
            d.schedule(key(id), expected[id]);
            cancelled[id] = false;
        }
        // Stale entries are reclaimed: the heap never grows far past the live deadlines.
        REQUIRE(d.heap_size() <= 2 * d.size() + 65);
    }
    std::vector<Clock::time_point> seen;
    std::vector<bool> called(count, false);
    for (auto now = t0; now <= t0 + 11s; now += 100ms) {
        d.run_due(now, [&](DeadlineKey k, Clock::time_point at) {
            REQUIRE_FALSE(called[k.id]);
            called[k.id] = true;
            REQUIRE(expected[k.id] <= at);
            REQUIRE(at - expected[k.id] < 100ms);
            seen.push_back(expected[k.id]);
        });
    }
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    for (std::uint64_t id = 0; id < count; ++id) REQUIRE(called[id] != cancelled[id]);
    CHECK(d.size() == 0);
}

TEST_CASE("the timerfd goes off at the earliest deadline") {
    Deadlines d;
    REQUIRE(d.open() == 0);
    int calls = 0;
    const auto count = [&](DeadlineKey, Clock::time_point) { ++calls; };
    CHECK(d.expire(count) == 0);  // not readable: a stale readiness calls nothing
    const auto t0 = Clock::now();
    d.schedule(key(2), t0 + 400ms);
    d.schedule(key(1), t0 + 40ms);
    REQUIRE(readable(d.fd(), 5000));
    CHECK(Clock::now() - t0 >= 40ms);
    CHECK(Clock::now() - t0 < 400ms);
    CHECK(d.expire(count) == 1);
    // It is set again for the next one, with nothing else to do.
    REQUIRE(readable(d.fd(), 5000));
    CHECK(Clock::now() - t0 >= 400ms);
    CHECK(d.expire(count) == 1);
    CHECK(calls == 2);
    CHECK_FALSE(readable(d.fd(), 0));
}

TEST_CASE("a deadline already past wakes the timerfd at once") {
    Deadlines d;
    REQUIRE(d.open() == 0);
    d.schedule(key(1), Clock::now() + 1h);
    d.schedule(key(2), Clock::now() - 1s);
    REQUIRE(readable(d.fd(), 1000));
    std::vector<std::uint64_t> ids;
    d.expire([&](DeadlineKey k, Clock::time_point) { ids.push_back(k.id); });
    CHECK(ids == std::vector<std::uint64_t>{2});
}

TEST_CASE("deadlines that only move later never set the timerfd again") {
    Deadlines d;
    REQUIRE(d.open() == 0);
    const auto t0 = Clock::now();
    d.schedule(key(1), t0 + 50ms);
    CHECK(d.arms() == 1);
    for (int i = 1; i <= 1000; ++i) d.schedule(key(1), t0 + 50ms + i * 1ms);
    d.schedule(key(2), t0 + 2s);
    CHECK(d.arms() == 1);
    // It goes off for nothing at 50 ms and sets itself for the moved deadline.
    REQUIRE(readable(d.fd(), 5000));
    CHECK(d.expire([](DeadlineKey, Clock::time_point) { FAIL("nothing is due"); }) == 0);
    CHECK(d.arms() == 2);
    REQUIRE(readable(d.fd(), 5000));
    CHECK(Clock::now() - t0 >= 1050ms);
    std::vector<std::uint64_t> ids;
    d.expire([&](DeadlineKey k, Clock::time_point) { ids.push_back(k.id); });
    CHECK(ids == std::vector<std::uint64_t>{1});

    SECTION("an earlier deadline sets it at once") {
        d.schedule(key(3), Clock::now() + 10ms);
        CHECK(d.arms() == 4);  // after the move to key 2's 2 s, then this one
        REQUIRE(readable(d.fd(), 1000));
    }
}

TEST_CASE("a progress deadline moves on while the count moves, and expires a limit after") {
    Deadlines d;
    ProgressDeadline p;
    const auto k = key(1);
    const auto limit = 800ms;
    p.start(d, k, 0, limit);
    REQUIRE(p.timed);
    const auto t0 = p.since;
    CHECK(*d.when(k) == t0 + 100ms);  // a first look at limit / 8
    p.start(d, k, 5, limit);          // running already: nothing changes
    CHECK(p.seen == 0);
    // Bytes moved before each look: the next look comes limit / 8 later.
    std::uint64_t count = 0;
    auto now = t0;
    for (int i = 0; i < 20; ++i) {
        now = *d.when(k);
        bool expired = true;
        d.run_due(now, [&](DeadlineKey key, Clock::time_point at) {
            expired = p.expired(d, key, ++count, at, limit);
        });
        REQUIRE_FALSE(expired);
        REQUIRE(*d.when(k) == now + 100ms);
    }
    // The peer stops: the next look finds nothing and waits for the limit after the last
    // look that found progress.
    const auto last_progress_look = now;
    now = *d.when(k);
    bool expired = true;
    d.run_due(now, [&](DeadlineKey key, Clock::time_point at) {
        expired = p.expired(d, key, count, at, limit);
    });
    CHECK_FALSE(expired);
    CHECK(*d.when(k) == last_progress_look + limit);
    d.run_due(last_progress_look + limit, [&](DeadlineKey key, Clock::time_point at) {
        expired = p.expired(d, key, count, at, limit);
    });
    CHECK(expired);
    CHECK_FALSE(p.timed);
    CHECK_FALSE(d.when(k));
}

TEST_CASE("take_due gives the waits due and keeps one deadline for the earliest of the rest") {
    Deadlines d;
    const Clock::time_point t0 = Clock::now();
    const DeadlineKey rts = key(7, DeadlineKind::rendezvous);
    // cookie -> when its RTS fails; time_point{}: answered, or another connection's.
    std::unordered_map<std::uint64_t, Clock::time_point> waiting{
        {1, t0 + 10ms}, {2, t0 + 30ms}, {3, Clock::time_point{}}, {4, t0 + 20ms}, {5, t0 + 5ms}};
    auto at = [](Clock::time_point when) { return when; };
    std::vector<std::uint64_t> due = take_due(d, rts, t0 + 10ms, waiting, at);
    std::sort(due.begin(), due.end());
    CHECK(due == std::vector<std::uint64_t>{1, 5});
    REQUIRE(d.when(rts).has_value());
    CHECK(*d.when(rts) == t0 + 20ms);
    for (std::uint64_t cookie : due) waiting.erase(cookie);
    waiting.erase(4);
    waiting.erase(2);
    CHECK(take_due(d, rts, t0 + 40ms, waiting, at).empty());
    // Nothing left waits: the deadline is not scheduled again (it came due and was taken).
    CHECK(d.run_due(t0 + 40ms, [](DeadlineKey, Clock::time_point) {}) == 1);
    CHECK(take_due(d, rts, t0 + 50ms, waiting, at).empty());
    CHECK_FALSE(d.when(rts).has_value());
}

TEST_CASE("a second take_due under the same key only moves its deadline earlier") {
    Deadlines d;
    const Clock::time_point t0 = Clock::now();
    const DeadlineKey key_of_both = key(9, DeadlineKind::rendezvous);
    auto at = [](Clock::time_point when) { return when; };
    // Two kinds of wait share the connection's deadline: the first scan sets it...
    std::unordered_map<std::uint64_t, Clock::time_point> first{{1, t0 + 20ms}};
    CHECK(take_due(d, key_of_both, t0, first, at).empty());
    REQUIRE(d.when(key_of_both).has_value());
    CHECK(*d.when(key_of_both) == t0 + 20ms);
    // ... and a second one whose earliest wait is later leaves it where it is,
    std::unordered_map<std::uint64_t, Clock::time_point> later{{2, t0 + 50ms}};
    CHECK(take_due(d, key_of_both, t0, later, at, Reschedule::earlier_only).empty());
    CHECK(*d.when(key_of_both) == t0 + 20ms);
    // while one whose earliest wait is sooner brings it forward.
    std::unordered_map<std::uint64_t, Clock::time_point> sooner{{3, t0 + 5ms}, {4, t0 - 1ms}};
    std::vector<std::uint64_t> due =
        take_due(d, key_of_both, t0, sooner, at, Reschedule::earlier_only);
    CHECK(due == std::vector<std::uint64_t>{4});
    CHECK(*d.when(key_of_both) == t0 + 5ms);
    // Replacing, as the first scan does, would have pushed it back to the later wait.
    CHECK(take_due(d, key_of_both, t0, later, at).empty());
    CHECK(*d.when(key_of_both) == t0 + 50ms);
}
