// SPDX-License-Identifier: LGPL-2.1-or-later
#include <catch2/catch.hpp>

#include <cstdint>

#include "support/budget/budget.hpp"

using bmi::support::Budget;

TEST_CASE("budget: per-peer bytes and count, and a total over peers", "[budget]") {
    Budget budget({1000, 3, 1500});
    Budget::Account a, b;
    CHECK(budget.fits(a, 1000));
    CHECK_FALSE(budget.fits(a, 1001));
    budget.charge(a, 600);
    CHECK_FALSE(budget.fits(a, 401));  // a's bytes
    CHECK(budget.fits(a, 400));
    budget.charge(b, 800);
    CHECK_FALSE(budget.fits(a, 101));  // the total: 600 + 800 + 101 > 1500
    CHECK(budget.fits(a, 100));
    budget.charge(a, 0);
    budget.charge(a, 0);
    CHECK_FALSE(budget.fits(a, 0));  // a's count: three kept
    budget.release(a, 0);
    CHECK(budget.fits(a, 0));
    budget.release(b, 800);
    CHECK(budget.total() == 600);
    CHECK(budget.fits(a, 400));
}

TEST_CASE("budget: no announced cost can overflow the checks", "[budget]") {
    Budget budget({INT64_MAX - 10, INT64_MAX, INT64_MAX - 5});
    Budget::Account a;
    budget.charge(a, INT64_MAX - 20);
    CHECK_FALSE(budget.fits(a, INT64_MAX));
    CHECK_FALSE(budget.fits(a, 11));
    CHECK(budget.fits(a, 10));
    CHECK_FALSE(budget.fits(a, -1));
}

TEST_CASE("budget: fits_total asks only about the total", "[budget]") {
    Budget budget({100, 1, 250});
    Budget::Account a, b;
    budget.charge(a, 100);
    CHECK_FALSE(budget.fits(a, 1));  // a's share and count
    CHECK(budget.fits_total(150));   // but the keeper has room
    budget.charge(b, 100);
    CHECK(budget.fits_total(50));
    CHECK_FALSE(budget.fits_total(51));
    CHECK_FALSE(budget.fits_total(-1));
    CHECK_FALSE(budget.fits_total(INT64_MAX));
}
