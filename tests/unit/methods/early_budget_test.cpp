// SPDX-License-Identifier: LGPL-2.1-or-later
#include <catch2/catch.hpp>

#include <cstdint>

#include "methods/early_budget.hpp"

using bmi::method::EarlyBudget;

TEST_CASE("early budget: per-peer bytes and count, and a total over peers", "[early]") {
    EarlyBudget budget({1000, 3, 1500});
    EarlyBudget::Account a, b;
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

TEST_CASE("early budget: no announced cost can overflow the checks", "[early]") {
    EarlyBudget budget({INT64_MAX - 10, INT64_MAX, INT64_MAX - 5});
    EarlyBudget::Account a;
    budget.charge(a, INT64_MAX - 20);
    CHECK_FALSE(budget.fits(a, INT64_MAX));
    CHECK_FALSE(budget.fits(a, 11));
    CHECK(budget.fits(a, 10));
    CHECK_FALSE(budget.fits(a, -1));
}
