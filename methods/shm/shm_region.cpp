// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared buffers: allocation, the peer's mappings, and copies between segment lists.
#include "methods/shm/shm_region.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>

#include "bmi-types.h"
#include "methods/shm/shm_memfd.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
std::size_t page_rounded(std::size_t size) {
    auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (std::max<std::size_t>(size, 1) + page - 1) / page * page;
}
}  // namespace

OwnRegions::~OwnRegions() {
    for (auto& [base, region] : regions_) {
        munmap(region.base, region.size);
        close(region.fd);
    }
}

std::size_t OwnRegions::class_size(std::size_t size) {
    std::size_t bytes = page_rounded(size);
    return bytes <= max_pooled_class ? std::bit_ceil(bytes) : bytes;
}

void* OwnRegions::allocate(std::size_t size) {
    std::size_t bytes = class_size(size);
    if (auto it = pool_.find(bytes); it != pool_.end() && !it->second.empty()) {
        // The most recently freed one: its pages are the likeliest to be in cache.
        Region* region = it->second.back();
        it->second.pop_back();
        // Exact-size classes of large regions come and go; an empty one is not kept.
        if (it->second.empty()) pool_.erase(it);
        region->pooled = false;
        pooled_bytes_ -= region->size;
        return region->base;
    }
    // Sealed (shm_memfd.hpp): a peer's copy can never touch a page that is gone (SIGBUS).
    int fd = create_sealed_memfd("bmi-shm-buffer", bytes);
    if (fd < 0) return nullptr;
    // Populated at once, here and in the peer's mapping: the first messages through a fresh
    // buffer otherwise pay for its page tables (doc/perf/code-figures.md, "Shared buffers").
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (base == MAP_FAILED) {
        close(fd);
        return nullptr;
    }
    Region region;
    region.id = next_id_++;
    region.base = static_cast<std::byte*>(base);
    region.size = bytes;
    region.fd = fd;
    regions_.emplace(reinterpret_cast<std::uintptr_t>(base), std::move(region));
    return base;
}

OwnRegions::Region* OwnRegions::at(const void* base) {
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(base));
    return it == regions_.end() || it->second.pooled ? nullptr : &it->second;
}

bool OwnRegions::recycle(Region& region) {
    if (region.retired) return false;
    auto it = pool_.find(region.size);
    std::size_t held = it == pool_.end() ? 0 : it->second.size();
    if (held >= limits_.per_class || pooled_bytes_ + region.size > limits_.bytes) return false;
    region.pooled = true;
    pooled_bytes_ += region.size;
    pool_[region.size].push_back(&region);
    return true;
}

void OwnRegions::release(Region& region) {
    munmap(region.base, region.size);
    close(region.fd);
    regions_.erase(reinterpret_cast<std::uintptr_t>(region.base));
}

OwnRegions::Region* OwnRegions::containing(const void* data, std::size_t size) {
    auto address = reinterpret_cast<std::uintptr_t>(data);
    auto it = regions_.upper_bound(address);
    if (it == regions_.begin()) return nullptr;
    Region& region = std::prev(it)->second;
    auto begin = reinterpret_cast<std::uintptr_t>(region.base);
    bool inside = address - begin <= region.size && size <= region.size - (address - begin);
    return inside && !region.pooled ? &region : nullptr;
}

void OwnRegions::forget_connection(std::uint64_t connection) {
    for (auto& [base, region] : regions_) region.offered.erase(connection);
}

PeerRegions::Mapping::~Mapping() {
    if (local != nullptr) munmap(local, size);
}

int PeerRegions::add(const RegionMessage& offer, int fd) {
    // Only a region that cannot shrink below what it claims is safe to copy from or into.
    bool sound = offer.size > 0 && offer.address + offer.size > offer.address &&
                 sealed_memfd_of_size(fd, static_cast<std::size_t>(offer.size));
    // A region at the same address replaces the old one (below), whose bytes then no longer
    // count against the budget.
    auto old = by_address_.find(offer.address);
    bool replaces = old != by_address_.end();
    std::size_t kept_bytes = mapped_bytes_ - (replaces ? old->second->size : 0);
    std::size_t kept_count = by_address_.size() - (replaces ? 1 : 0);
    bool affordable = kept_count < max_count_ && kept_bytes <= max_bytes_ &&
                      offer.size <= max_bytes_ - kept_bytes;
    if (!sound || !affordable) {
        close(fd);
        return sound ? -BMI_ENOMEM : -BMI_EINVAL;
    }
    int populate = offer.size <= populate_limit ? MAP_POPULATE : 0;
    void* local = mmap(nullptr, static_cast<std::size_t>(offer.size), PROT_READ | PROT_WRITE,
                       MAP_SHARED | populate, fd, 0);
    close(fd);
    if (local == MAP_FAILED) return -BMI_ENOMEM;
    auto mapping = std::make_shared<Mapping>();
    mapping->id = offer.id;
    mapping->address = offer.address;
    mapping->size = static_cast<std::size_t>(offer.size);
    mapping->local = static_cast<std::byte*>(local);
    // A region at the same address replaces the one the peer freed there; a well-behaved
    // peer withdrew that first, and then there is nothing to replace.
    mapped_bytes_ = kept_bytes + mapping->size;
    by_address_[offer.address] = std::move(mapping);
    return 0;
}

void PeerRegions::remove(std::uint64_t id) {
    std::erase_if(by_address_, [&](const auto& entry) {
        if (entry.second->id != id) return false;
        forget(*entry.second);
        return true;
    });
}

bool PeerRegions::translate(std::span<const RemoteIov> remote, std::vector<Segment>& out,
                            Keep& keep) const {
    out.clear();
    keep.clear();
    for (const RemoteIov& iov : remote) {
        auto it = by_address_.upper_bound(iov.address);
        if (it == by_address_.begin()) break;
        const auto& mapping = std::prev(it)->second;
        std::uint64_t offset = iov.address - mapping->address;
        if (offset > mapping->size || iov.length > mapping->size - offset) break;
        out.push_back({mapping->local + offset, static_cast<bmi_size_t>(iov.length)});
        if (keep.empty() || keep.back() != mapping) keep.push_back(mapping);
    }
    if (out.size() == remote.size() && !remote.empty()) return true;
    out.clear();
    keep.clear();
    return false;
}

}  // namespace bmi::method::shm
