// SPDX-License-Identifier: LGPL-2.1-or-later
// What PMIx returned for each allocation id, reduced to plain C++ values, and the pure step
// that turns it into allocations: the text form parsed by parse_allocations, plus the key.
// Kept apart from libpmix so that every accepted form and every refusal is unit-tested
// without a launcher; pmix_allocation.cpp only copies pmix_value_t into these types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "support/planes/pmix_allocation.hpp"

namespace bmi::support::planes {

using PmixBytes = std::vector<std::uint8_t>;
// A PMIx type the conversion does not take (a pointer, a nested array...), by its PMIx name.
struct PmixOtherType {
    std::string name;
};
// Strings; every non-negative integer type; float and double; byte objects.
using PmixScalar = std::variant<std::string, std::uint64_t, double, PmixBytes, PmixOtherType>;

struct PmixItem {
    std::string key;
    PmixScalar value;
};

// One id's value: a bare scalar, or a PMIX_DATA_ARRAY of PMIX_INFO (`array` set).
struct PmixValue {
    PmixScalar scalar;
    std::optional<std::vector<PmixItem>> array;
};

// One id's value as the allocation text form, and its key (empty if none).
struct PmixConverted {
    std::string text;
    PmixBytes key;
};

// Converts one id's value; nullopt with `field` and `message` naming what is wrong. A bare
// string is the resources of a tcp allocation with one endpoint on every address
// (plane 0.0.0.0/0). `local_size` (processes of the job on this node, 0 if unknown) divides
// pmix.alloc.endpts.nd when pmix.alloc.endpts is absent.
std::optional<PmixConverted> convert_pmix_value(std::string_view id, const PmixValue& value,
                                                std::uint32_t local_size, std::string& field,
                                                std::string& message);

// Everything after the lookups: converts and parses each id's value (values[i] belongs to
// ids[i]) with parse_allocations, source "PMIx <nspace> <id>", and checks that all ids carry
// one key. Returns found (out filled except local_rank) or malformed (note says why).
PmixStatus allocations_from_pmix(std::string_view nspace, std::span<const std::string> ids,
                                 std::span<const PmixValue> values, std::uint32_t local_size,
                                 PmixAllocations& out, std::string& note);

}  // namespace bmi::support::planes
