// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/qos.hpp"

#include <array>
#include <charconv>
#include <utility>

namespace bmi::support::planes {

std::optional<int> dscp_for_level(std::string_view level) {
    // RFC 2474 (class selectors), 2597 (assured forwarding), 3246 (expedited), 8622 (lower
    // effort). Lower case only: the allocation text is case-sensitive everywhere else too.
    static constexpr std::array<std::pair<std::string_view, int>, 24> named{{
        {"be", 0},    {"le", 1},    {"cs0", 0},   {"cs1", 8},   {"cs2", 16},  {"cs3", 24},
        {"cs4", 32},  {"cs5", 40},  {"cs6", 48},  {"cs7", 56},  {"af11", 10}, {"af12", 12},
        {"af13", 14}, {"af21", 18}, {"af22", 20}, {"af23", 22}, {"af31", 26}, {"af32", 28},
        {"af33", 30}, {"af41", 34}, {"af42", 36}, {"af43", 38}, {"ef", 46},   {"default", 0},
    }};
    for (const auto& [name, dscp] : named)
        if (name == level) return dscp;
    constexpr std::string_view prefix = "dscp:";
    if (level.substr(0, prefix.size()) != prefix) return std::nullopt;
    const std::string_view digits = level.substr(prefix.size());
    int value = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc{} || end != digits.data() + digits.size() || value < 0 || value > 63)
        return std::nullopt;
    return value;
}

}  // namespace bmi::support::planes
