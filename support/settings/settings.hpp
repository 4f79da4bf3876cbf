// SPDX-License-Identifier: LGPL-2.1-or-later
// The values of every setting of a table (setting_table.hpp) for one instance, and where
// each came from. Read once, when the instance is created: first the table's default, then
// the environment (BMI_UNEXPECTED_QUOTA=1G), then BMI_initialize's option string
// ("unexpected_quota=1G,emulate_lists=1"), each overriding the one before: the option string is
// the more specific of the two, set by the program for this instance. Strict: a malformed or
// out-of-range value, or an option key the table does not have, is an error that names the
// setting, the value and what was expected, never a silent default. A row's former name
// (SettingSpec::former) is still read, with a warning naming the current one; a row given
// under two of its names with different values, in one source, is an error naming both.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "support/settings/setting_table.hpp"

namespace bmi::support {

// allocation: raised by the allocation in force (doc/planes.md), which a setting may make
// stricter but never weaker.
enum class SettingSource : std::uint8_t { table_default, environment, option_string, allocation };
// "default", "environment", "option", "allocation"
std::string_view source_name(SettingSource source);

// The value text means for this row (a choice's index, a duration in ms, a flag as 0/1), or
// nullopt if it is malformed or outside the row's range. Text rows take anything.
std::optional<std::int64_t> parse_setting(const SettingSpec& spec, std::string_view text);
// What the row accepts, for error messages: "a size from 0 to 1024G bytes (suffixes ...)".
std::string expected_text(const SettingSpec& spec);
// The same, short, for tables: "0 .. 1024G", "0, 1, auto", "any".
std::string range_text(const SettingSpec& spec);

// An owner's row enum (support::SettingId, or a method's own SettingId), with its owner's
// `const SettingSpec& setting_spec(Id)` beside it, found by argument-dependent lookup.
template <typename Id>
concept SettingEnum = std::is_enum_v<Id> && requires(Id id) {
    { setting_spec(id) } -> std::same_as<const SettingSpec&>;
};

class Settings {
public:
    // Every row of table at its default. The table must outlive the Settings (they are
    // static: method::all_settings(), general_settings()).
    explicit Settings(const SettingTable& table);

    const SettingTable& table() const { return *table_; }

    // Reads the environment, then option_string, over the defaults. 0, or -BMI_EINVAL after
    // one BMI_WARN per bad value (all of them, so one run shows every mistake); the rows that
    // were bad keep their default and are marked invalid.
    int load(std::string_view option_string);
    // Sets one row from text as if it came from source; 0 or -BMI_EINVAL (logged).
    int set(const SettingSpec& row, std::string_view text, SettingSource source);

    // A row of this table (reading one the table lacks is a programming error: it aborts).
    // size, count, flag (0/1) and choice (index) rows.
    std::int64_t number(const SettingSpec& row) const { return at(row).number; }
    bool flag(const SettingSpec& row) const { return at(row).number != 0; }
    std::chrono::milliseconds duration(const SettingSpec& row) const {
        return std::chrono::milliseconds(at(row).number);
    }
    const std::string& text(const SettingSpec& row) const { return at(row).text; }
    SettingSource source(const SettingSpec& row) const { return at(row).source; }
    bool valid(const SettingSpec& row) const { return at(row).valid; }
    // The value in force as text, in the row's units ("8M", "10s", "auto").
    std::string shown(const SettingSpec& row) const;

    // The same by an owner's enum: settings.number(SettingId::unexpected_quota).
    template <SettingEnum Id>
    int set(Id id, std::string_view text, SettingSource source) {
        return set(setting_spec(id), text, source);
    }
    template <SettingEnum Id>
    std::int64_t number(Id id) const {
        return number(setting_spec(id));
    }
    template <SettingEnum Id>
    bool flag(Id id) const {
        return flag(setting_spec(id));
    }
    template <SettingEnum Id>
    std::chrono::milliseconds duration(Id id) const {
        return duration(setting_spec(id));
    }
    template <SettingEnum Id>
    const std::string& text(Id id) const {
        return text(setting_spec(id));
    }
    template <SettingEnum Id>
    SettingSource source(Id id) const {
        return source(setting_spec(id));
    }
    template <SettingEnum Id>
    bool valid(Id id) const {
        return valid(setting_spec(id));
    }
    template <SettingEnum Id>
    std::string shown(Id id) const {
        return shown(setting_spec(id));
    }

private:
    struct Value {
        std::int64_t number = 0;
        std::string text;  // as given; for text rows, the value itself
        SettingSource source = SettingSource::table_default;
        bool valid = true;
    };
    std::size_t index(const SettingSpec& row) const;
    const Value& at(const SettingSpec& row) const { return values_[index(row)]; }
    Value& at(const SettingSpec& row) { return values_[index(row)]; }
    int read_environment(const SettingSpec& row);
    int read_options(std::string_view option_string);
    // A row given under two of its names with different values: one warning naming both.
    int refuse_disagreement(const SettingSpec& row, std::string_view name, std::string_view text,
                            std::string_view other, std::string_view other_text);

    const SettingTable* table_;
    std::vector<Value> values_;  // one per row of table_, in its order
};

}  // namespace bmi::support
