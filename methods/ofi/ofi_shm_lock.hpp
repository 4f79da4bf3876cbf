// SPDX-License-Identifier: LGPL-2.1-or-later
// The spin lock in an shm endpoint's region that libfabric 1.17 takes without a bound.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "methods/ofi/ofi_shm.hpp"

namespace bmi::method::ofi {

// libfabric 1.17's shm takes a spin lock in the receiver's region for each send to it, and the
// region's owner takes its own in its progress and when a receive meets a waiting message. A
// process killed while it holds one leaves it held for good, and every later call that takes
// it spins in the provider for ever, out of reach of any deadline of ours. A look at the lock
// before such a call lets us not make it.
class ShmRegionLock {
public:
    // A read-only map of the head of the region of `address` ("ofi+shm://NAME"), if it is the
    // file `file` (when given) and its layout is one whose lock is known (versions 4 and 5:
    // libfabric 1.17 to 1.19; later versions send without the lock). Null otherwise.
    static std::unique_ptr<ShmRegionLock> open(const std::string& address,
                                               const std::optional<ShmRegionFile>& file);
    // Our own region's, mapped for writing too, so that take_back() can free its lock.
    static std::unique_ptr<ShmRegionLock> open_own(const std::string& address);
    ~ShmRegionLock();
    ShmRegionLock(const ShmRegionLock&) = delete;
    ShmRegionLock& operator=(const ShmRegionLock&) = delete;

    // Whether the lock is free now or within a few microseconds (a live holder's section).
    bool free_soon() const;
    // Whether the process that made the region, whose name is `address`'s, still runs: its pid
    // exists, or its name's claim (ShmNameClaim) is held.
    bool owner_alive(const std::string& address) const;
    // Whether the region's maker's pid still exists (ours may not see it from another pid
    // namespace: a hint, not a proof).
    bool maker_runs() const;
    // Frees the lock that a process which ended holding it left (open_own only).
    void take_back();

private:
    ShmRegionLock(void* map, std::size_t length, bool writable);
    static std::unique_ptr<ShmRegionLock> map_region(const std::string& address,
                                                     const std::optional<ShmRegionFile>& file,
                                                     bool writable);
    std::atomic<int>& word() const;
    void* map_;
    std::size_t length_;
    bool writable_;
};

// Whether /dev/shm holds a region of a known layout (ShmRegionLock) whose maker's pid is gone:
// an shm endpoint that ended without closing, so perhaps while it held a lock.
bool shm_region_of_ended_process();

}  // namespace bmi::method::ofi
