// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/port_ranges.hpp"

#include <algorithm>

#include "support/planes/text_fields.hpp"

namespace bmi::support::planes {

std::optional<PortRanges> PortRanges::parse(std::string_view text, std::string& error) {
    std::vector<PortRange> items;
    for (std::string_view item : split_on(text, ',')) {
        const std::size_t dash = item.find('-');
        const auto first = parse_whole(item.substr(0, dash), 1, 65535);
        const auto last =
            dash == std::string_view::npos ? first : parse_whole(item.substr(dash + 1), 1, 65535);
        if (!first || !last) {
            error = quoted(item) + " is not a port (1..65535) or a range a-b";
            return std::nullopt;
        }
        if (*first > *last) {
            error = quoted(item) + " runs backwards";
            return std::nullopt;
        }
        items.push_back({static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last)});
    }
    std::sort(items.begin(), items.end(),
              [](const PortRange& a, const PortRange& b) { return a.first < b.first; });
    PortRanges out;
    for (const PortRange& r : items) {
        if (!out.ranges_.empty() && r.first <= out.ranges_.back().last) {
            error = "port " + std::to_string(r.first) + " is listed twice";
            return std::nullopt;
        }
        out.add(r);
    }
    return out;
}

void PortRanges::add(PortRange range) {
    auto at =
        std::lower_bound(ranges_.begin(), ranges_.end(), range,
                         [](const PortRange& a, const PortRange& b) { return a.first < b.first; });
    at = ranges_.insert(at, range);
    // Merge with the neighbours it touches, so text() is canonical.
    if (at != ranges_.begin() && std::prev(at)->last + 1 == at->first) {
        std::prev(at)->last = at->last;
        at = std::prev(ranges_.erase(at));
    }
    if (std::next(at) != ranges_.end() && at->last + 1 == std::next(at)->first) {
        at->last = std::next(at)->last;
        ranges_.erase(std::next(at));
    }
}

std::size_t PortRanges::count() const {
    std::size_t n = 0;
    for (const PortRange& r : ranges_) n += static_cast<std::size_t>(r.last - r.first) + 1;
    return n;
}

bool PortRanges::contains(std::uint16_t port) const {
    return std::any_of(ranges_.begin(), ranges_.end(),
                       [&](const PortRange& r) { return r.first <= port && port <= r.last; });
}

bool PortRanges::overlaps(const PortRanges& other) const {
    for (const PortRange& a : ranges_)
        for (const PortRange& b : other.ranges_)
            if (a.first <= b.last && b.first <= a.last) return true;
    return false;
}

std::string PortRanges::text() const {
    std::string out;
    for (const PortRange& r : ranges_) {
        if (!out.empty()) out += ',';
        out += std::to_string(r.first);
        if (r.last != r.first) {
            out += '-';
            out += std::to_string(r.last);
        }
    }
    return out;
}

}  // namespace bmi::support::planes
