// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocation model of RFC0030 (SPEC §4): a request names what one library wants on one
// plane, each value optionally *required*; the allocation answers it per id with what was
// granted. Both have a text form (doc/planes.md), one entry per line or per ';':
//     request:     id=bmi.storage type=tcp endpts=4! plane=storage bw=200 qos=bulk key=yes!
//     allocation:  id=bmi.storage type=tcp plane=10.20.0.0/16 endpts=4 ports=32000-32003
//                  bw=200 qos=bulk key_file=/run/bmi/bmi.storage.key degraded=bw
// Parsing is strict: an unknown, repeated, missing or malformed field is an error that names
// it, never a default.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/planes/plane.hpp"
#include "support/planes/port_ranges.hpp"
#include "support/planes/text_fields.hpp"

namespace bmi::support::planes {

// One requested value and whether the request fails when it cannot be had exactly.
template <class T>
struct Wanted {
    std::optional<T> value;  // nullopt: not asked for
    bool required = false;
};

// One pmix.alloc.net entry. The RFC attribute each field carries is in the comment.
struct RequestEntry {
    std::string id;                 // pmix.alloc.netid (required; not "pmix...")
    Wanted<PlaneType> type;         // pmix.alloc.nettype (required)
    Wanted<std::size_t> endpoints;  // pmix.alloc.endpts (required, >= 1)
    Wanted<std::string> plane;      // pmix.alloc.netplane: inventory name or identifier
    Wanted<std::string> qos;        // pmix.alloc.netqos
    Wanted<double> bandwidth_mbps;  // pmix.alloc.bw, Mbit/s
    Wanted<bool> key;               // pmix.alloc.nsec: "key=yes" asks for a fresh key
};

struct Allocation {
    std::string id;
    PlaneType type = PlaneType::tcp;
    std::string plane;  // the plane's identifier (CIDR, device:port, node)
    std::size_t endpoints = 0;
    PortRanges ports;                   // tcp only, and then at least `endpoints` ports
    std::string qos;                    // "" when none was granted
    double bandwidth_mbps = 0;          // 0 when none was granted (unpaced)
    std::string key_file;               // "" when no key (keys stay out of the text)
    std::string encryption;             // "" when the entry sets no policy: off|prefer|require
    std::vector<std::string> degraded;  // fields granted other than asked, e.g. {"bw"}
};

// `source` names the text in errors ("BMI_ALLOCATION", a path).
std::optional<std::vector<RequestEntry>> parse_requests(std::string_view text,
                                                        std::string_view source, ParseError& error);
std::optional<std::vector<Allocation>> parse_allocations(std::string_view text,
                                                         std::string_view source,
                                                         ParseError& error);

std::string format_request(const RequestEntry& entry);
std::string format_allocation(const Allocation& allocation);

}  // namespace bmi::support::planes
