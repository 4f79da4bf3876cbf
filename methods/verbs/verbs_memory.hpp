// SPDX-License-Identifier: LGPL-2.1-or-later
// Memory registration. Regions from BMI_memalloc are registered once, when allocated, and stay
// in an address-keyed cache until BMI_memfree: every transfer inside them is a cache hit, and
// freeing is the explicit invalidation, so a reused address can never meet a stale entry.
// Any other memory is registered for one transfer and deregistered when it ends (a miss): we
// cannot see the application free() it, and a registration that outlived a free() would pin
// the old pages and move stale data (doc/methods/verbs.md, "Registration cache").
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>

namespace bmi::method::verbs {

class RegCache {
public:
    explicit RegCache(ibv_pd* pd) : pd_(pd) {}
    ~RegCache();
    RegCache(const RegCache&) = delete;
    RegCache& operator=(const RegCache&) = delete;

    // A registration covering [data, data + size), valid until release().
    struct Handle {
        ibv_mr* mr = nullptr;
        void* region = nullptr;  // the cached region it belongs to, or nullptr if owned
    };
    // writable: the NIC will write into it (receive side). 0 or -BMI_E*.
    int acquire(void* data, std::size_t size, bool writable, Handle& out);
    void release(Handle& handle);

    // BMI_memalloc / BMI_memfree for this method. free returns false for unknown memory.
    void* allocate(std::size_t size);
    bool free(void* data);

    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }
    std::size_t regions() const { return regions_.size(); }

private:
    struct Region {
        std::size_t size = 0;
        ibv_mr* mr = nullptr;
        int users = 0;       // transfers holding a Handle into it
        bool freed = false;  // BMI_memfree came while users > 0: drop at the last release
    };
    void destroy(void* data, Region* region);

    ibv_pd* pd_;
    std::map<std::uintptr_t, Region*> regions_;  // start address -> region
    std::map<Region*, void*> pending_free_;      // freed while in use -> its memory
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
};

}  // namespace bmi::method::verbs
