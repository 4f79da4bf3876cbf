// SPDX-License-Identifier: LGPL-2.1-or-later
// Strict parsers for setting values, whatever their source (environment, option string). Each
// takes the whole text or nothing: a site that sets BMI_UNEXPECTED_QUOTA=8MB must get an
// error (settings.hpp names the setting), not a limit it did not choose.
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

}  // namespace bmi::support
