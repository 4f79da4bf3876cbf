// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method's statistics of one test instance (get_info 0x7301), for the tests that check
// how their messages travelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "harness.hpp"
#include "methods/shm/shm_method.hpp"

namespace bmi::test {

// nullopt if the instance did not answer the query (Catch cannot report from a child process,
// so the callers decide how to fail).
inline std::optional<method::shm::Stats> shm_stats(Side& side) {
    method::shm::Stats stats;
    if (side.instance->get_info(0, method::shm::get_stats_option, &stats) != 0) return std::nullopt;
    return stats;
}

// How many of side's large receives of size's class completed over path; nullopt as above.
inline std::optional<std::uint64_t> large_receives(Side& side, std::size_t size,
                                                   method::shm::TakenPath path) {
    auto stats = shm_stats(side);
    if (!stats) return std::nullopt;
    return stats->large_receives[method::shm::PathChoice::class_of(static_cast<bmi_size_t>(size))]
                                [static_cast<std::size_t>(path)];
}

}  // namespace bmi::test
