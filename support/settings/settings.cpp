// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/settings/settings.hpp"

#include <cstdlib>

#include "bmi-types.h"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/settings/env_setting.hpp"

namespace bmi::support {

namespace {
// The largest binary suffix that divides the value exactly, so defaults read as written.
std::string size_text(std::int64_t bytes) {
    static constexpr std::pair<std::int64_t, const char*> units[] = {
        {1ll << 30, "G"}, {1ll << 20, "M"}, {1ll << 10, "K"}};
    for (auto [factor, suffix] : units)
        if (bytes != 0 && bytes % factor == 0) return std::to_string(bytes / factor) + suffix;
    return std::to_string(bytes);
}

std::string duration_text(std::int64_t ms) {
    if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
    if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

// The index of word among choices ("0|1|auto"), or nullopt.
std::optional<std::int64_t> choice_index(std::string_view choices, std::string_view word) {
    std::int64_t index = 0;
    for (;;) {
        const auto bar = choices.find('|');
        if (choices.substr(0, bar) == word) return index;
        if (bar == std::string_view::npos) return std::nullopt;
        choices.remove_prefix(bar + 1);
        ++index;
    }
}

std::string_view choice_word(std::string_view choices, std::int64_t index) {
    for (; index > 0; --index) {
        const auto bar = choices.find('|');
        if (bar == std::string_view::npos) return {};
        choices.remove_prefix(bar + 1);
    }
    return choices.substr(0, choices.find('|'));
}

std::optional<std::int64_t> within(const SettingSpec& spec, std::optional<std::int64_t> value) {
    if (!value || *value < spec.min || *value > spec.max) return std::nullopt;
    return value;
}
}  // namespace

std::string_view source_name(SettingSource source) {
    switch (source) {
        case SettingSource::environment:
            return "environment";
        case SettingSource::option_string:
            return "option";
        case SettingSource::allocation:
            return "allocation";
        case SettingSource::table_default:
            break;
    }
    return "default";
}

std::optional<std::int64_t> parse_setting(const SettingSpec& spec, std::string_view text) {
    switch (spec.type) {
        case SettingType::size:
            return within(spec, parse_size(text));
        case SettingType::duration: {
            auto ms = parse_duration(text);
            return within(spec, ms ? std::optional<std::int64_t>(ms->count()) : std::nullopt);
        }
        case SettingType::count:
            return within(spec, parse_count(text));
        case SettingType::flag: {
            auto on = parse_flag(text);
            return on ? std::optional<std::int64_t>(*on ? 1 : 0) : std::nullopt;
        }
        case SettingType::choice:
            return choice_index(spec.choices, text);
        case SettingType::text:
            if (spec.text_form != nullptr && !spec.text_form(text)) return std::nullopt;
            break;
    }
    return 0;
}

std::string range_text(const SettingSpec& spec) {
    switch (spec.type) {
        case SettingType::size:
            return size_text(spec.min) + " .. " + size_text(spec.max);
        case SettingType::duration:
            return duration_text(spec.min) + " .. " + duration_text(spec.max);
        case SettingType::count:
            return std::to_string(spec.min) + " .. " + std::to_string(spec.max);
        case SettingType::flag:
            return "0, 1";
        case SettingType::choice: {
            std::string words(spec.choices);
            for (std::size_t bar = words.find('|'); bar != std::string::npos; bar = words.find('|'))
                words.replace(bar, 1, ", ");
            return words;
        }
        case SettingType::text:
            if (spec.text_form != nullptr) return std::string(spec.text_form_name);
            break;
    }
    return "any";
}

std::string expected_text(const SettingSpec& spec) {
    switch (spec.type) {
        case SettingType::size:
            return "a size from " + size_text(spec.min) + " to " + size_text(spec.max) +
                   " bytes (suffixes K, M, G)";
        case SettingType::duration:
            return "a time from " + duration_text(spec.min) + " to " + duration_text(spec.max) +
                   " (units ms, s, m; a plain number is ms)";
        case SettingType::count:
            return "a whole number from " + std::to_string(spec.min) + " to " +
                   std::to_string(spec.max);
        case SettingType::flag:
            return "0 or 1 (or no/yes, false/true, off/on)";
        case SettingType::choice:
            return "one of " + range_text(spec);
        case SettingType::text:
            if (spec.text_form != nullptr) return std::string(spec.text_form_name);
            break;
    }
    return "any text";
}

Settings::Settings(const SettingTable& table) : table_(&table), values_(table.size()) {
    for (const SettingSpec& spec : table.rows()) {
        Value& v = at(spec);
        v.text = std::string(spec.default_text);
        // The table's own defaults parse (tests/unit/support/settings_test.cpp checks each).
        v.number = parse_setting(spec, spec.default_text).value_or(0);
    }
}

std::size_t Settings::index(const SettingSpec& row) const {
    if (auto where = table_->position(row)) return *where;
    // Only code can ask for a row its instance's table lacks; no input reaches here.
    BMI_WARN("setting %.*s read from a table that does not have it",
             static_cast<int>(row.env.size()), row.env.data());
    std::abort();
}

int Settings::set(const SettingSpec& spec, std::string_view text, SettingSource source) {
    Value& v = at(spec);
    v.source = source;
    auto parsed = parse_setting(spec, text);
    if (!parsed) {
        v.valid = false;
        BMI_WARN("setting %.*s (%s %.*s) = \"%.*s\" is not valid: expected %s",
                 static_cast<int>(spec.env.size()), spec.env.data(),
                 source == SettingSource::option_string ? "BMI_initialize option"
                 : source == SettingSource::allocation  ? "allocation field; option"
                                                        : "environment; option",
                 static_cast<int>(spec.key.size()), spec.key.data(), static_cast<int>(text.size()),
                 text.data(), expected_text(spec).c_str());
        return -BMI_EINVAL;
    }
    v.number = *parsed;
    v.text = std::string(text);
    v.valid = true;
    return 0;
}

int Settings::load(std::string_view option_string) {
    int rc = 0;
    for (const SettingSpec& spec : table_->rows())
        if (read_environment(spec) < 0) rc = -BMI_EINVAL;
    if (read_options(option_string) < 0) rc = -BMI_EINVAL;
    return rc;
}

namespace {
// Empty means unset, as a shell's "BMI_X= program" intends.
const char* environment_value(std::string_view name) {
    const char* text = std::getenv(std::string(name).c_str());
    return text == nullptr || *text == '\0' ? nullptr : text;
}

void warn_former(std::string_view former, std::string_view current, const char* what) {
    BMI_WARN("%s %.*s is the former name of %.*s: read as it; please rename it", what,
             static_cast<int>(former.size()), former.data(), static_cast<int>(current.size()),
             current.data());
}
}  // namespace

int Settings::read_environment(const SettingSpec& spec) {
    const char* text = environment_value(spec.env);
    std::string_view name = spec.env;
    for (std::string_view former : former_names(spec)) {
        const char* old = environment_value(former);
        if (old == nullptr) continue;
        if (text != nullptr && std::string_view(text) != old)
            return refuse_disagreement(spec, name, text, former, old);
        warn_former(former, spec.env, "environment variable");
        if (text == nullptr) {
            text = old;
            name = former;
        }
    }
    if (text == nullptr) return 0;
    return set(spec, text, SettingSource::environment);
}

int Settings::refuse_disagreement(const SettingSpec& spec, std::string_view name,
                                  std::string_view text, std::string_view other,
                                  std::string_view other_text) {
    at(spec).valid = false;
    BMI_WARN("setting %.*s = \"%.*s\" and %.*s = \"%.*s\" name the same setting (%.*s, "
             "option %.*s) with different values: keep only the current name",
             static_cast<int>(name.size()), name.data(), static_cast<int>(text.size()), text.data(),
             static_cast<int>(other.size()), other.data(), static_cast<int>(other_text.size()),
             other_text.data(), static_cast<int>(spec.env.size()), spec.env.data(),
             static_cast<int>(spec.key.size()), spec.key.data());
    return -BMI_EINVAL;
}

int Settings::read_options(std::string_view option_string) {
    struct Given {
        const SettingSpec* row;
        std::string_view key, value;
    };
    std::vector<Given> given;  // this string's items so far, to catch a row given twice
    int rc = 0;
    for (auto item : split_address_list(option_string)) {
        const auto equals = item.find('=');
        const std::string_view key = item.substr(0, equals);
        const SettingSpec* spec = equals == std::string_view::npos ? nullptr : table_->find(key);
        std::string_view former_env;
        if (spec == nullptr && equals != std::string_view::npos &&
            (spec = table_->find_former(key, former_env)) != nullptr)
            warn_former(key, spec->key, "BMI_initialize option");
        if (spec == nullptr || !spec->per_instance) {
            // A misspelt key would otherwise leave its setting where the caller did not want.
            BMI_WARN("BMI_initialize option \"%.*s\" is not valid: expected key=value with a "
                     "key of the settings table (bmi-info lists them; %s)",
                     static_cast<int>(item.size()), item.data(),
                     spec != nullptr ? "this one is read from the environment only"
                                     : "doc/SETTINGS.md");
            rc = -BMI_EINVAL;
            continue;
        }
        const std::string_view value = item.substr(equals + 1);
        bool disagrees = false;
        for (const Given& g : given)
            if (g.row == spec && g.key != key && g.value != value) {
                refuse_disagreement(*spec, g.key, g.value, key, value);
                disagrees = true;
                break;
            }
        given.push_back({spec, key, value});
        if (disagrees || set(*spec, value, SettingSource::option_string) < 0) rc = -BMI_EINVAL;
    }
    return rc;
}

std::string Settings::shown(const SettingSpec& spec) const {
    const Value& v = at(spec);
    switch (spec.type) {
        case SettingType::size:
            return size_text(v.number);
        case SettingType::duration:
            return duration_text(v.number);
        case SettingType::count:
        case SettingType::flag:
            return std::to_string(v.number);
        case SettingType::choice:
            return std::string(choice_word(spec.choices, v.number));
        case SettingType::text:
            break;
    }
    return v.text;
}

}  // namespace bmi::support
