// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's wait policy (methods/ofi/ofi_waiting.hpp): who polls before a sleep, with
// which cap, and the nap a provider without a wait descriptor sleeps in.
#include <catch2/catch.hpp>

#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>

#include "methods/ofi/ofi_waiting.hpp"

using bmi::method::ofi::Waiting;
using Load = Waiting::Load;

namespace {
// The method's epoll set, which a nap's timer joins.
struct EpollSet {
    EpollSet() = default;
    EpollSet(const EpollSet&) = delete;
    EpollSet& operator=(const EpollSet&) = delete;
    ~EpollSet() {
        if (fd >= 0) close(fd);
    }
    const int fd = epoll_create1(EPOLL_CLOEXEC);
};
}  // namespace

TEST_CASE("with a wait descriptor an idle instance sleeps at once", "[ofi][waiting]") {
    Waiting waiting(20, 500, 1000);
    int polls = 0;
    CHECK_FALSE(waiting.before_sleep(Load::idle, [&] { return ++polls, false; }));
    CHECK(polls == 0);
}

TEST_CASE("while operations wait the queue is polled first, and work found means no sleep",
          "[ofi][waiting]") {
    Waiting waiting(20, 500, 1000);
    int polls = 0;
    CHECK(waiting.before_sleep(Load::operations, [&] { return ++polls == 3; }));
    CHECK(polls == 3);
}

TEST_CASE("a transfer in the provider spins under its own cap", "[ofi][waiting]") {
    // ofi_spin_us=0: operations sleep at once; a transfer still spins (ofi_transfer_spin_us).
    Waiting waiting(0, 500, 1000);
    int polls = 0;
    CHECK_FALSE(waiting.before_sleep(Load::operations, [&] { return ++polls, false; }));
    CHECK(polls == 0);
    CHECK(waiting.before_sleep(Load::transfer, [&] { return ++polls, true; }));
    CHECK(polls == 1);
    // ofi_transfer_spin_us=0 falls back to ofi_spin_us.
    Waiting same(20, 0, 1000);
    polls = 0;
    CHECK(same.before_sleep(Load::transfer, [&] { return ++polls, true; }));
    CHECK(polls == 1);
}

TEST_CASE("without a wait descriptor an idle instance polls, then naps on its timer",
          "[ofi][waiting]") {
    const EpollSet epoll;
    REQUIRE(epoll.fd >= 0);
    {
        Waiting waiting(20, 500, 1000);
        REQUIRE(waiting.start_naps(epoll.fd, 2) == 0);
        CHECK(waiting.naps());
        int polls = 0;
        CHECK_FALSE(waiting.before_sleep(Load::idle, [&] { return ++polls, false; }));
        CHECK(polls > 0);
        // The first nap is short: the epoll set wakes well within a second.
        epoll_event event{};
        const auto start = std::chrono::steady_clock::now();
        CHECK(epoll_wait(epoll.fd, &event, 1, 1000) == 1);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
        waiting.clear();
        CHECK(epoll_wait(epoll.fd, &event, 1, 0) == 0);
    }
}

TEST_CASE("without a wait descriptor operations waiting yield after traffic, then nap",
          "[ofi][waiting]") {
    const EpollSet epoll;
    // ofi_nap_us=50: the yielding lasts a nap's length after the last traffic.
    Waiting waiting(0, 0, 50);
    REQUIRE(waiting.start_naps(epoll.fd, 2) == 0);
    const auto nothing = [] { return false; };
    // No traffic yet: a nap.
    CHECK_FALSE(waiting.before_sleep(Load::operations, nothing));
    CHECK(waiting.naps_taken() == 1);
    // Traffic: the caller is told to poll again (after a yield), and no nap is armed...
    waiting.traffic();
    CHECK(waiting.before_sleep(Load::operations, nothing));
    CHECK(waiting.naps_taken() == 1);
    // ...but an idle instance naps at once all the same...
    CHECK_FALSE(waiting.before_sleep(Load::idle, nothing));
    CHECK(waiting.naps_taken() == 2);
    // ...and operations nap again once a nap's length passed without traffic.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (waiting.before_sleep(Load::operations, nothing) &&
           std::chrono::steady_clock::now() < give_up) {
    }
    CHECK(waiting.naps_taken() == 3);
}
