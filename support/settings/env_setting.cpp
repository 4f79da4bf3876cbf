// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/settings/env_setting.hpp"

#include <cctype>
#include <charconv>

namespace bmi::support {

namespace {
bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// The leading decimal digits of text as a number, and the rest in unit.
std::optional<std::int64_t> leading_number(std::string_view text, std::string_view& unit) {
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end == text.data() || value < 0) return std::nullopt;
    unit = text.substr(static_cast<std::size_t>(end - text.data()));
    return value;
}

std::optional<std::int64_t> scaled(std::int64_t value, std::int64_t factor) {
    if (value > INT64_MAX / factor) return std::nullopt;
    return value * factor;
}

}  // namespace

std::optional<std::int64_t> parse_size(std::string_view text) {
    std::string_view unit;
    auto value = leading_number(text, unit);
    if (!value) return std::nullopt;
    struct Suffix {
        std::string_view a, b;
        std::int64_t factor;
    };
    static constexpr Suffix suffixes[] = {
        {"", "b", 1}, {"k", "kib", 1ll << 10}, {"m", "mib", 1ll << 20}, {"g", "gib", 1ll << 30}};
    for (const auto& s : suffixes)
        if (iequals(unit, s.a) || iequals(unit, s.b)) return scaled(*value, s.factor);
    return std::nullopt;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    std::string_view unit;
    auto value = leading_number(text, unit);
    if (!value) return std::nullopt;
    std::optional<std::int64_t> ms;
    if (unit.empty() || iequals(unit, "ms"))
        ms = value;
    else if (iequals(unit, "s"))
        ms = scaled(*value, 1000);
    else if (iequals(unit, "m") || iequals(unit, "min"))
        ms = scaled(*value, 60'000);
    if (!ms) return std::nullopt;
    return std::chrono::milliseconds(*ms);
}

std::optional<std::int64_t> parse_count(std::string_view text) {
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end == text.data() || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

std::optional<bool> parse_flag(std::string_view text) {
    for (std::string_view yes : {"1", "yes", "true", "on"})
        if (iequals(text, yes)) return true;
    for (std::string_view no : {"0", "no", "false", "off"})
        if (iequals(text, no)) return false;
    return std::nullopt;
}

}  // namespace bmi::support
