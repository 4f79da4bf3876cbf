// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's statistics of one test instance, read through get_info as an application
// would, for the tests that check what the method holds or did.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>

#include "bmi/core/instance.hpp"
#include "harness.hpp"
#include "methods/ofi/ofi_method.hpp"

namespace bmi::test {

// any: an address of the instance's ofi method when it has others as well.
inline method::ofi::Stats ofi_stats(core::Instance& instance, BMI_addr_t any = 0) {
    method::ofi::Stats stats;
    REQUIRE(instance.get_info(any, method::ofi::get_stats_option, &stats) == 0);
    return stats;
}

inline method::ofi::Stats ofi_stats(Side& side) { return ofi_stats(*side.instance); }

// Whether a counter of a side that progresses on its own (a Pump) comes to satisfy `holds`
// within `ms`: what it does with a message just sent is done in its own time.
template <class Holds>
bool ofi_stats_come_to(Side& side, Holds holds, int ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!holds(ofi_stats(side))) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

}  // namespace bmi::test
