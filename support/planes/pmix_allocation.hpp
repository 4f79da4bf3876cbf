// SPDX-License-Identifier: LGPL-2.1-or-later
// Reading network allocations (RFC0030) from the job information a PMIx launcher holds
// (doc/planes.md, "Reading the allocation from PMIx"). Optional: without the `pmix` Meson
// option the function still exists and answers `unavailable`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "support/planes/allocation.hpp"

namespace bmi::support::planes {

enum class PmixStatus {
    found,        // every id was read; out is filled
    unavailable,  // no PMIx here: built without it, no launcher in the environment, or PMIx_Init
                  // failed
    absent,       // a launcher answered, but does not hold (one of) the ids (e.g. Debian's mpirun)
    malformed,  // an id was found but its value is not a valid allocation: an error, not a fallback
    unloadable,  // a launcher is in the environment but libpmix does not load: an error too
};

struct PmixAllocations {
    std::vector<Allocation> entries;  // one per id, in the order asked
    std::vector<std::uint8_t> key;    // pmix.alloc.nsec bytes (16..64), empty if none
    std::uint32_t local_rank = 0;     // PMIX_LOCAL_RANK of this process (0 if unknown)
};

// Reads each id from job information ({namespace, PMIX_RANK_WILDCARD}, PMIX_OPTIONAL=true, so
// a missing id never waits for a remote answer). PMIx is touched only when the environment
// names a launcher (PMIX_NAMESPACE and a PMIX_SERVER_URI*); PMIx_Init and PMIx_Finalize bracket
// the read, and both are reference-counted, so MPI in the same process is unaffected.
// `out` is filled only on `found`. `note` always says what happened, for the debug log and for
// errors: which ids, which launcher namespace, why it fell back, or which field of which id is
// malformed; never the key bytes. Blocking: at most one local round trip to the launcher per id.
PmixStatus read_pmix_allocations(std::span<const std::string> ids, PmixAllocations& out,
                                 std::string& note);

}  // namespace bmi::support::planes
