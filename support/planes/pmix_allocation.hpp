// SPDX-License-Identifier: LGPL-2.1-or-later
// Reading an allocation by id from PMIx job information (doc/planes.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "support/planes/allocation.hpp"

namespace bmi::support::planes {

enum class PmixStatus {
    found,        // every id was read; out is filled
    unavailable,  // no PMIx here: built without it, no launcher in the environment, or PMIx_Init failed
    absent,       // a launcher answered, but does not hold (one of) the ids (e.g. Debian's mpirun)
    malformed,    // an id was found but its value is not a valid allocation: an error, not a fallback
};

struct PmixAllocations {
    std::vector<Allocation> entries;  // one per id, in the order asked
    std::vector<std::uint8_t> key;    // pmix.alloc.nsec bytes, empty if none
    std::uint32_t local_rank = 0;     // PMIX_LOCAL_RANK of this process (0 if unknown)
};

// Reads each id from job information ({namespace, PMIX_RANK_WILDCARD}, PMIX_OPTIONAL=true).
// `note` always says what happened, for the debug log and for errors.
PmixStatus read_pmix_allocations(std::span<const std::string> ids, PmixAllocations& out,
                                 std::string& note);

}  // namespace bmi::support::planes
