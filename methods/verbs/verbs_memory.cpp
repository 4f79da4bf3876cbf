// SPDX-License-Identifier: LGPL-2.1-or-later
// The registration cache: BMI_memalloc regions registered for life, other memory per transfer.
#include "methods/verbs/verbs_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>

#include "support/error/error_map.hpp"
#include "support/optional_library/ibverbs.hpp"

namespace bmi::method::verbs {

RegCache::~RegCache() {
    // Regions the application never freed: the method is going away, so is the memory.
    for (auto& [start, region] : regions_) {
        if (region->mr) support::ibv().dereg_mr(region->mr);
        std::free(reinterpret_cast<void*>(start));
        delete region;
    }
    for (auto& [region, data] : pending_free_) {
        support::ibv().dereg_mr(region->mr);
        std::free(data);
        delete region;
    }
}

RegCache::Region* RegCache::region_of(void* data, std::size_t size) const {
    const auto start = reinterpret_cast<std::uintptr_t>(data);
    auto it = regions_.upper_bound(start);
    if (it == regions_.begin()) return nullptr;
    --it;
    Region* r = it->second;
    return start >= it->first && start + size <= it->first + r->size ? r : nullptr;
}

int RegCache::acquire(void* data, std::size_t size, Use use, Handle& out) {
    Region* r = region_of(data, size);
    if (r != nullptr && use == Use::local_write) {
        ++hits_;
        ++r->users;
        out = Handle{r->mr, r, false};
        return 0;
    }
    ++misses_;
    // Send buffers may live in read-only memory, which refuses LOCAL_WRITE.
    const int access = use == Use::local_write ? IBV_ACCESS_LOCAL_WRITE : IBV_ACCESS_REMOTE_READ;
    ibv_mr* mr = support::ibv().reg_mr(pd_, size > 0 ? data : static_cast<void*>(&out),
                                       size > 0 ? size : 1, access);
    if (mr == nullptr) return support::bmi_error_from_errno(errno != 0 ? errno : ENOMEM);
    // Inside a region, BMI_memfree must not hand the pages back while a peer can still READ
    // them through this registration: the region counts it as a user.
    if (r != nullptr) ++r->users;
    out = Handle{mr, r, true};
    return 0;
}

void RegCache::release(Handle& handle) {
    if (handle.owned && handle.mr != nullptr) support::ibv().dereg_mr(handle.mr);
    if (handle.region != nullptr) {
        auto* r = static_cast<Region*>(handle.region);
        if (--r->users == 0 && r->freed) {
            support::ibv().dereg_mr(r->mr);
            destroy(nullptr, r);
        }
    }
    handle = Handle{};
}

void* RegCache::allocate(std::size_t size) {
    void* data = nullptr;
    // Page alignment: the region shares no page with other heap objects.
    if (posix_memalign(&data, 4096, size > 0 ? size : 1) != 0) return nullptr;
    auto* r = new Region{};
    r->size = size > 0 ? size : 1;
    r->mr = support::ibv().reg_mr(pd_, data, r->size, IBV_ACCESS_LOCAL_WRITE);
    if (r->mr == nullptr) {
        std::free(data);
        delete r;
        return nullptr;
    }
    regions_[reinterpret_cast<std::uintptr_t>(data)] = r;
    return data;
}

bool RegCache::free(void* data) {
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(data));
    if (it == regions_.end()) return false;
    Region* r = it->second;
    regions_.erase(it);
    // The entry leaves the cache now, so a later allocation at the same address registers
    // afresh; a transfer still using the region keeps its registration until it ends.
    if (r->users > 0) {
        r->freed = true;
        pending_free_[r] = data;
        return true;
    }
    support::ibv().dereg_mr(r->mr);
    std::free(data);
    delete r;
    return true;
}

void RegCache::destroy(void*, Region* region) {
    auto it = pending_free_.find(region);
    if (it != pending_free_.end()) {
        std::free(it->second);
        pending_free_.erase(it);
    }
    delete region;
}

}  // namespace bmi::method::verbs
