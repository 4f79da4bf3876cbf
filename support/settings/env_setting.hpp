// SPDX-License-Identifier: LGPL-2.1-or-later
// Strict reading of one numeric setting from the environment. A malformed or out-of-range value
// is an error that names the variable, never a silent fallback to the default: a site that sets
// BMI_TCP_EARLY_PEER_BYTES=8MB and gets the default instead has a limit it did not choose.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace bmi::support {

// "4096", "64K", "64KiB", "8M", "8MiB", "1G", "1GiB" (binary multiples; case-insensitive).
std::optional<std::int64_t> parse_size(std::string_view text);
// "250ms", "10s", "2m", or a plain number of milliseconds.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// A whole decimal number, "-1" included, and nothing after it.
std::optional<std::int64_t> parse_count(std::string_view text);
// "1", "yes", "true", "on" and "0", "no", "false", "off" (case-insensitive).
std::optional<bool> parse_flag(std::string_view text);

// Reads the size in variable `name` into value if it is set and non-empty. 0 on success or
// when unset (value unchanged); -BMI_EINVAL if the text is malformed or outside [min, max],
// after logging the variable, the text and what was expected.
int env_size(const char* name, std::int64_t& value, std::int64_t min, std::int64_t max);
// The same for a duration.
int env_duration(const char* name, std::chrono::milliseconds& value,
                 std::chrono::milliseconds min, std::chrono::milliseconds max);

}  // namespace bmi::support
