// SPDX-License-Identifier: LGPL-2.1-or-later
// Debug logging selected by mask. BMI_DEBUG=control,tcp,... (or "all") turns areas on; nothing is
// printed by default. The mask is read once, on first use; a disabled BMI_LOG costs one load and
// one branch and does not evaluate its arguments. BMI_WARN is the exception: always printed, for
// the rare condition an operator must see without BMI_DEBUG (callers make it rare, e.g. once).
#pragma once

#include <cstdint>

namespace bmi::support {

enum class LogArea : std::uint32_t {
    control = 1u << 0,  // method control layer: init, contexts, test calls
    address = 1u << 1,  // address lookup and the reference list
    tcp = 1u << 2,
    shm = 1u << 3,
    verbs = 1u << 4,
    error = 1u << 5,    // failures decided inside the library (on by "error" or "all")
    warning = 1u << 6,  // BMI_WARN: printed whatever the mask
    ofi = 1u << 7,
};

// Parses a BMI_DEBUG-style list; unknown words are ignored.
std::uint32_t parse_log_mask(const char* text);
std::uint32_t log_mask();
bool log_enabled(LogArea area);
[[gnu::format(printf, 2, 3)]] void log_print(LogArea area, const char* format, ...);

}  // namespace bmi::support

#define BMI_LOG(area, ...)                                                         \
    do {                                                                           \
        if (::bmi::support::log_enabled(::bmi::support::LogArea::area))            \
            ::bmi::support::log_print(::bmi::support::LogArea::area, __VA_ARGS__); \
    } while (0)

#define BMI_WARN(...) ::bmi::support::log_print(::bmi::support::LogArea::warning, __VA_ARGS__)
