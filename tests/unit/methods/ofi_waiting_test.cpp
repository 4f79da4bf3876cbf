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
    const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(epoll_fd >= 0);
    {
        Waiting waiting(20, 500, 1000);
        REQUIRE(waiting.start_naps(epoll_fd, 2) == 0);
        CHECK(waiting.naps());
        int polls = 0;
        CHECK_FALSE(waiting.before_sleep(Load::idle, [&] { return ++polls, false; }));
        CHECK(polls > 0);
        // The first nap is short: the epoll set wakes well within a second.
        epoll_event event{};
        const auto start = std::chrono::steady_clock::now();
        CHECK(epoll_wait(epoll_fd, &event, 1, 1000) == 1);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
        waiting.clear();
        CHECK(epoll_wait(epoll_fd, &event, 1, 0) == 0);
    }
    close(epoll_fd);
}
