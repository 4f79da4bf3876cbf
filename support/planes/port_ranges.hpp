// SPDX-License-Identifier: LGPL-2.1-or-later
// A set of tcp ports written as the RFC writes it: "32000-32100,33005,38123-38146".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::support::planes {

struct PortRange {
    std::uint16_t first;
    std::uint16_t last;  // inclusive; first <= last
};

class PortRanges {
public:
    // Items separated by ',' (no blanks), each a port 1..65535 or "a-b" with a <= b. Items may
    // come in any order but may not overlap: "32000-32100,32050" is an error, since a writer
    // who lists a port twice has probably mistyped one of them.
    static std::optional<PortRanges> parse(std::string_view text, std::string& error);

    void add(PortRange range);  // the caller keeps ranges disjoint; adjacent ones merge
    bool empty() const { return ranges_.empty(); }
    std::size_t count() const;  // ports in the set
    bool contains(std::uint16_t port) const;
    bool overlaps(const PortRanges& other) const;
    const std::vector<PortRange>& ranges() const { return ranges_; }
    std::string text() const;  // sorted, merged: the same set always prints the same

private:
    std::vector<PortRange> ranges_;  // sorted, disjoint, not adjacent
};

}  // namespace bmi::support::planes
