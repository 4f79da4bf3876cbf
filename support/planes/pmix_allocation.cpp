// SPDX-License-Identifier: LGPL-2.1-or-later
// Placeholder until the PMIx reader lands: this build reads no PMIx.
#include "support/planes/pmix_allocation.hpp"

namespace bmi::support::planes {

PmixStatus read_pmix_allocations(std::span<const std::string>, PmixAllocations&,
                                 std::string& note) {
    note = "built without PMIx";
    return PmixStatus::unavailable;
}

}  // namespace bmi::support::planes
