// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocator, for whoever plays the resource manager (RFC0030's RM): given an inventory,
// it answers requests with allocations. Ports come from each tcp plane's pool and are never
// handed out twice; bandwidth comes from a plane's stated capacity; a requested key is 32 fresh
// bytes from the kernel (getrandom) written to a 0600 key file. A required value is held exactly
// or the request fails naming it, and a failed request takes nothing; an unrequired value that
// cannot be had is granted in part or not at all and listed as degraded.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "support/planes/allocation.hpp"
#include "support/planes/inventory.hpp"

namespace bmi::tools {

using support::planes::Allocation;
using support::planes::Inventory;
using support::planes::RequestEntry;

struct AllocationOutcome {
    std::optional<Allocation> allocation;   // nullopt: refused, `error` says which value
    std::string error;                      // "endpts: plane storage has 3 free ports, 4 required"
    std::vector<std::string> degradations;  // one line per degraded value, saying how
};

class Allocator {
public:
    // Keys are written into `key_dir` as "<id>.key"; "" refuses requests that need a key.
    Allocator(Inventory inventory, std::string key_dir);

    AllocationOutcome allocate(const RequestEntry& request);

private:
    struct PlaneState {
        support::planes::PortRanges free_ports;
        double free_bandwidth_mbps = 0;  // only where the inventory states a capacity
    };
    Inventory inventory_;
    std::string key_dir_;
    std::vector<PlaneState> state_;  // parallel to inventory_.planes
};

// Writes 32 bytes from getrandom as 64 hex digits to `path` (created, mode 0600, never over an
// existing file). "" on success, else why not.
std::string write_fresh_key_file(const std::string& path);

}  // namespace bmi::tools
