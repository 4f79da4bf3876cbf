// SPDX-License-Identifier: LGPL-2.1-or-later
#include <catch2/catch.hpp>

#include <cstdlib>

#include "bmi-types.h"
#include "support/settings/env_setting.hpp"

using namespace bmi::support;
using namespace std::chrono_literals;

TEST_CASE("sizes take binary suffixes and nothing else", "[settings]") {
    CHECK(parse_size("4096") == 4096);
    CHECK(parse_size("64K") == 64 << 10);
    CHECK(parse_size("64kib") == 64 << 10);
    CHECK(parse_size("8MiB") == 8 << 20);
    CHECK(parse_size("1G") == 1ll << 30);
    CHECK_FALSE(parse_size(""));
    CHECK_FALSE(parse_size("abc"));
    CHECK_FALSE(parse_size("8MB"));
    CHECK_FALSE(parse_size("-1"));
    CHECK_FALSE(parse_size("1 M"));
    CHECK_FALSE(parse_size("99999999999G"));  // overflows 64 bits
}

TEST_CASE("durations take ms, s and m", "[settings]") {
    CHECK(parse_duration("250") == 250ms);
    CHECK(parse_duration("250ms") == 250ms);
    CHECK(parse_duration("10s") == 10s);
    CHECK(parse_duration("2m") == 120s);
    CHECK_FALSE(parse_duration("10 s"));
    CHECK_FALSE(parse_duration("abc"));
    CHECK_FALSE(parse_duration("5h"));
}
