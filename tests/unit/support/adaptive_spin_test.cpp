// SPDX-License-Identifier: LGPL-2.1-or-later
// AdaptiveSpin: polls until success or the budget is spent, halves a spent budget, grows on
// success or reward() up to its cap, and never polls with a zero budget.
#include <catch2/catch.hpp>

#include <chrono>

#include "support/spin/adaptive_spin.hpp"

using bmi::support::AdaptiveSpin;

TEST_CASE("a spin stops at the first successful poll and keeps its budget at the cap") {
    AdaptiveSpin spin(50);
    int polls = 0;
    REQUIRE(spin.run([&] { return ++polls == 3; }));
    REQUIRE(polls == 3);
    REQUIRE(spin.budget_us() == 50);
}

TEST_CASE("a spent budget halves until nothing is polled any more") {
    AdaptiveSpin spin(40);
    auto start = std::chrono::steady_clock::now();
    REQUIRE_FALSE(spin.run([] { return false; }));
    REQUIRE(std::chrono::steady_clock::now() - start >= std::chrono::microseconds(40));
    REQUIRE(spin.budget_us() == 20);
    while (spin.budget_us() > 0) spin.run([] { return false; });
    int polls = 0;
    REQUIRE_FALSE(spin.run([&] { return ++polls > 0; }));
    REQUIRE(polls == 0);  // a zero budget sleeps at once
}

TEST_CASE("reward grows a collapsed budget back to the cap and no further") {
    AdaptiveSpin spin(20);
    while (spin.budget_us() > 0) spin.run([] { return false; });
    spin.reward();
    REQUIRE(spin.budget_us() == 1);
    for (int i = 0; i < 10; ++i) spin.reward();
    REQUIRE(spin.budget_us() == 20);
}

TEST_CASE("a cap of zero never spins") {
    AdaptiveSpin spin(0);
    spin.reward();
    REQUIRE(spin.budget_us() == 0);
    int polls = 0;
    REQUIRE_FALSE(spin.run([&] { return ++polls > 0; }));
    REQUIRE(polls == 0);
}
