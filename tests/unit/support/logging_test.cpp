// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for parsing the BMI_DEBUG log mask.
#include "support/logging/log.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

using bmi::support::LogArea;
using bmi::support::parse_log_mask;

namespace {
constexpr std::uint32_t bit(LogArea area) { return static_cast<std::uint32_t>(area); }
}  // namespace

TEST_CASE("single and combined areas", "[logging]") {
    CHECK(parse_log_mask("tcp") == bit(LogArea::tcp));
    CHECK(parse_log_mask("tcp,control") == (bit(LogArea::tcp) | bit(LogArea::control)));
    CHECK(parse_log_mask("control tcp") == (bit(LogArea::tcp) | bit(LogArea::control)));
    CHECK(parse_log_mask("address,shm,verbs,error") ==
          (bit(LogArea::address) | bit(LogArea::shm) | bit(LogArea::verbs) | bit(LogArea::error)));
    CHECK(parse_log_mask("tcp,tcp") == bit(LogArea::tcp));
}

TEST_CASE("all turns every area on", "[logging]") {
    std::uint32_t all = parse_log_mask("all");
    for (LogArea area : {LogArea::control, LogArea::address, LogArea::tcp, LogArea::shm,
                         LogArea::verbs, LogArea::error}) {
        CAPTURE(bit(area));
        CHECK((all & bit(area)) != 0);
    }
    CHECK(parse_log_mask("tcp,all") == all);
}

TEST_CASE("empty, null and unknown words give nothing", "[logging]") {
    CHECK(parse_log_mask(nullptr) == 0);
    CHECK(parse_log_mask("") == 0);
    CHECK(parse_log_mask(",") == 0);
    CHECK(parse_log_mask("nosuch") == 0);
    CHECK(parse_log_mask("TCP") == 0);   // names are lower case
    CHECK(parse_log_mask("tcpx") == 0);  // whole words only
    CHECK(parse_log_mask("alll") == 0);
    CHECK(parse_log_mask("nosuch,tcp,,other") == bit(LogArea::tcp));
}
