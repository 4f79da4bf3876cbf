// SPDX-License-Identifier: LGPL-2.1-or-later
// Memory registration. Regions from BMI_memalloc are registered once, when allocated, for local
// access only, and stay in an address-keyed cache until BMI_memfree: every receive inside them
// is a cache hit, and freeing is the explicit invalidation, so a reused address can never meet
// a stale entry. Any other memory is registered for one transfer and deregistered when it ends
// (a miss): we cannot see the application free() it, and a registration that outlived a free()
// would pin the old pages and move stale data (doc/methods/verbs.md, "Registration cache").
// Memory a peer may READ is always registered for one transfer, exactly its bytes: the rkey an
// RTS hands out must open nothing else, and nothing once the transfer's FIN has come.
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

    // A registration covering [data, data + size), valid until release(). remote_read: the
    // peer will READ it (send side), so it gets a registration of its own, never the cache's.
    struct Handle {
        ibv_mr* mr = nullptr;
        void* region = nullptr;  // the BMI_memalloc region it lies in, kept allocated meanwhile
        bool owned = false;      // mr is this transfer's own registration
    };
    // 0 or -BMI_E*.
    enum class Use : std::uint8_t { local_write, remote_read };
    int acquire(void* data, std::size_t size, Use use, Handle& out);
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
    Region* region_of(void* data, std::size_t size) const;

    ibv_pd* pd_;
    std::map<std::uintptr_t, Region*> regions_;  // start address -> region
    std::map<Region*, void*> pending_free_;      // freed while in use -> its memory
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
};

}  // namespace bmi::method::verbs
