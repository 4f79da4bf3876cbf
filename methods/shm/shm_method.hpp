// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method's entry in the static method table: processes on one node over shared rings.
#pragma once

#include <cstdint>
#include <memory>

#include "methods/method.hpp"

namespace bmi::method::shm {

// Creates an shm instance; with a listen address "shm://name" it binds that name (0, or
// -BMI_EADDRINUSE if a live instance holds it, -BMI_EINVAL if malformed).
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

// BMI_get_info(addr or 0, get_stats_option, Stats*): how the instance's waits went.
inline constexpr int get_stats_option = 0x7301;
struct Stats {
    std::uint64_t futile_spins = 0;  // waits that slept at once: the peer waits on our CPU
};

inline constexpr Descriptor descriptor{"bmi_shm", "shm", &create};

}  // namespace bmi::method::shm
