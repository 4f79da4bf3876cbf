// SPDX-License-Identifier: LGPL-2.1-or-later
// The pace of the ofi backlog's retries after -FI_EAGAIN (methods/ofi/ofi_retry_pause.hpp).
#include <catch2/catch.hpp>

#include <chrono>

#include "methods/ofi/ofi_retry_pause.hpp"

using bmi::method::ofi::RetryPause;
using namespace std::chrono_literals;

namespace {
const RetryPause::Clock::time_point start = RetryPause::Clock::now();
}

TEST_CASE("each refusal in a row doubles the pause, up to the longest", "[ofi][retry]") {
    RetryPause pause;
    auto now = start;
    CHECK(pause.due(now));
    auto at = pause.refused(now);
    REQUIRE(at);
    CHECK(*at == now + RetryPause::first);
    CHECK_FALSE(pause.due(now + RetryPause::first - 1us));
    CHECK(pause.due(now + RetryPause::first));
    auto last = RetryPause::first;
    for (int i = 0; i < 20; ++i) {
        now = *at;
        at = pause.refused(now);
        REQUIRE(at);
        CHECK(*at - now == std::min(2 * last, RetryPause::longest));
        last = *at - now;
    }
    CHECK(last == RetryPause::longest);
}

TEST_CASE("a refusal while a pause runs neither grows it nor arms another timer", "[ofi][retry]") {
    RetryPause pause;
    REQUIRE(pause.refused(start));
    CHECK_FALSE(pause.refused(start + 10us));
    CHECK(pause.pause() == RetryPause::first);
}

TEST_CASE("a post that goes through starts the next refusal from the shortest pause",
          "[ofi][retry]") {
    RetryPause pause;
    auto now = start;
    for (int i = 0; i < 10; ++i) now = *pause.refused(now);
    REQUIRE(pause.pause() > RetryPause::first);
    pause.posted();
    CHECK(*pause.refused(now) - now == RetryPause::first);
}

TEST_CASE("the provider's wake-up ends a pause at once and keeps its length", "[ofi][retry]") {
    RetryPause pause;
    auto now = start;
    for (int i = 0; i < 4; ++i) now = *pause.refused(now);
    const auto grown = pause.pause();
    const auto during = now - 1us;  // `now` is when the last pause runs out
    CHECK_FALSE(pause.due(during));
    pause.woken();
    CHECK(pause.due(during));
    CHECK(*pause.refused(during) - during == std::min(2 * grown, RetryPause::longest));
}

// A dead peer's backlog is dropped with its grown pause; the next peer's first refusal must be
// retried after the shortest pause, not the longest.
TEST_CASE("a backlog that starts again from empty starts from the shortest pause", "[ofi][retry]") {
    RetryPause pause;
    auto now = start;
    for (int i = 0; i < 20; ++i) now = *pause.refused(now);
    REQUIRE(pause.pause() == RetryPause::longest);
    const auto during = now - 1ms;  // `now` is when the last pause runs out
    CHECK_FALSE(pause.due(during));
    pause.restart();
    CHECK(pause.due(during));
    CHECK(*pause.refused(during) - during == RetryPause::first);
}
