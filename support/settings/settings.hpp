// SPDX-License-Identifier: LGPL-2.1-or-later
// The values of every setting of the table (setting_table.hpp) for one instance, and where
// each came from. Read once, when the instance is created: first the table's default, then
// the environment (BMI_TCP_SPIN_US=20), then BMI_initialize's option string
// ("tcp_spin_us=20,shm_ring_slots=128"), each overriding the one before: the option string is
// the more specific of the two, set by the program for this instance. Strict: a malformed or
// out-of-range value, or an option key the table does not have, is an error that names the
// setting, the value and what was expected, never a silent default.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/settings/setting_table.hpp"

namespace bmi::support {

enum class SettingSource : std::uint8_t { table_default, environment, option_string };
std::string_view source_name(SettingSource source);  // "default", "environment", "option"

// The value text means for this row (a choice's index, a duration in ms, a flag as 0/1), or
// nullopt if it is malformed or outside the row's range. Text rows take anything.
std::optional<std::int64_t> parse_setting(const SettingSpec& spec, std::string_view text);
// What the row accepts, for error messages: "a size from 0 to 1024G bytes (suffixes ...)".
std::string expected_text(const SettingSpec& spec);
// The same, short, for tables: "0 .. 1024G", "0, 1, auto", "any".
std::string range_text(const SettingSpec& spec);

class Settings {
public:
    // Every row at its table default.
    Settings();

    // Reads the environment, then option_string, over the defaults. 0, or -BMI_EINVAL after
    // one BMI_WARN per bad value (all of them, so one run shows every mistake); the rows that
    // were bad keep their default and are marked invalid.
    int load(std::string_view option_string);
    // Sets one row from text as if it came from source; 0 or -BMI_EINVAL (logged).
    int set(SettingId id, std::string_view text, SettingSource source);

    // size, count, flag (0/1) and choice (index) rows.
    std::int64_t number(SettingId id) const { return at(id).number; }
    bool flag(SettingId id) const { return at(id).number != 0; }
    std::chrono::milliseconds duration(SettingId id) const {
        return std::chrono::milliseconds(at(id).number);
    }
    const std::string& text(SettingId id) const { return at(id).text; }
    SettingSource source(SettingId id) const { return at(id).source; }
    bool valid(SettingId id) const { return at(id).valid; }
    // The value in force as text, in the row's units ("8M", "10s", "auto").
    std::string shown(SettingId id) const;

private:
    struct Value {
        std::int64_t number = 0;
        std::string text;  // as given; for text rows, the value itself
        SettingSource source = SettingSource::table_default;
        bool valid = true;
    };
    const Value& at(SettingId id) const { return values_[static_cast<std::size_t>(id)]; }
    Value& at(SettingId id) { return values_[static_cast<std::size_t>(id)]; }
    int read_options(std::string_view option_string);

    std::array<Value, setting_count> values_;
};

}  // namespace bmi::support
