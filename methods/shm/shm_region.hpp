// SPDX-License-Identifier: LGPL-2.1-or-later
// Buffers from BMI_memalloc that the peer maps too, so a large message moves with memcpy.
//
// Cross-memory attach (process_vm_readv/writev) pins and copies page by page in the kernel,
// and what that costs depends on the machine: on the VMs of doc/PERFORMANCE.md it moves a
// fraction of what memcpy does (doc/perf/shm-notes.md, "Two machines"). Memory that both
// processes map needs no kernel at all once mapped. So BMI_memalloc on an shm address
// returns memory of a sealed memfd (the mapping the issue calls "shared mappings of the
// sender's buffer"), and before a message that lies in such memory is announced, the owner
// hands the memfd to the peer over the connection's socket. The peer maps it once and from
// then on copies its part of a split copy (shm_split.hpp) straight from or into it.
//
// Ordering is what keeps a mapping honest. Offers and withdrawals travel on the socket, the
// announcements that use them (RTS, HELP) in the ring, and an owner always writes the offer
// before the announcement. The peer reads every pending socket message before it turns an
// announcement's addresses into its own pointers, so it never uses a region the owner has
// unmapped (it withdraws it from every peer first) nor misses one just offered. A
// region is sealed against shrinking, so a mapped page can never vanish under a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "methods/method.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

// One socket message after the hello; an offer carries the region's memfd.
struct RegionMessage {
    std::uint32_t magic;  // region_offer or region_withdraw
    std::uint32_t reserved;
    std::uint64_t id;       // the owner's name for the region
    std::uint64_t address;  // where it lives in the owner
    std::uint64_t size;
};
inline constexpr std::uint32_t region_offer = 0x6f72676eu;     // "ngro"
inline constexpr std::uint32_t region_withdraw = 0x7772676eu;  // "nvrw"

// How many freed regions OwnRegions keeps for later allocations (BMI_SHM_POOL_BYTES,
// BMI_SHM_POOL_PER_CLASS); zero bytes or zero per class keeps none.
struct PoolLimits {
    std::size_t bytes = 0;
    std::size_t per_class = 0;
};

// The regions this instance allocated, and a pool of freed ones.
//
// Creating a region costs memfd_create, seals, a populated mapping, and at its first use with
// each peer an offer and the peer's mapping; PVFS allocates one or two buffers per request,
// so a region made per allocation cost more than the memcpy it saves. A freed region
// therefore goes back to the pool, by size class, still offered to and mapped by every peer
// that had it: the peer's mapping is of the same memfd, so it sees whatever the next owner
// writes and needs no new offer, and nothing stale can be read through it. Only a region
// leaving the pool (over its limits) is withdrawn from the peers and unmapped. Classes are
// powers of two up to max_pooled_class; larger regions keep their page-rounded size, pooled
// by that exact size, since rounding them up would populate up to twice their pages.
class OwnRegions {
public:
    struct Region {
        std::uint64_t id = 0;
        std::byte* base = nullptr;
        std::size_t size = 0;
        int fd = -1;
        bool pooled = false;              // freed, waiting in the pool: not the application's
        bool retired = false;             // a late writer may still reach it: never pooled
        std::set<std::uint64_t> offered;  // connection ids that have it
    };
    static constexpr std::size_t max_pooled_class = std::size_t{4} << 20;

    explicit OwnRegions(PoolLimits limits) : limits_(limits) {}
    OwnRegions(const OwnRegions&) = delete;
    OwnRegions& operator=(const OwnRegions&) = delete;
    ~OwnRegions();

    // size bytes of shared memory, from the pool when it holds a region of size's class;
    // nullptr if none can be made (the control layer then allocates). The bytes are not
    // cleared: pooled memory holds what its last owner wrote.
    void* allocate(std::size_t size);
    // The application's region that starts at base; nullptr for any other address and for
    // a region in the pool.
    Region* at(const void* base);
    // Takes a region from at() back into the pool; false when that would pass the pool's
    // limits or the region is retired: the caller then withdraws it from its peers and
    // release()s it.
    bool recycle(Region& region);
    // Unmaps and closes a region returned by at().
    void release(Region& region);
    // The application's region holding every byte of [data, data + size), or nullptr.
    Region* containing(const void* data, std::size_t size);
    // A closed connection no longer has any region.
    void forget_connection(std::uint64_t connection);
    std::size_t pooled_bytes() const { return pooled_bytes_; }

    // The size a request of size bytes gets: its class.
    static std::size_t class_size(std::size_t size);

private:
    PoolLimits limits_;
    std::map<std::uintptr_t, Region> regions_;          // by base address
    std::map<std::size_t, std::vector<Region*>> pool_;  // freed regions by class, last freed last
    std::size_t pooled_bytes_ = 0;
    std::uint64_t next_id_ = 1;
};

// What a peer offered us on one connection, mapped here.
class PeerRegions {
public:
    // One peer region as we map it; a split copy in progress holds a reference, so a
    // withdrawal never unmaps memory a copy is using.
    struct Mapping {
        std::uint64_t id = 0;
        std::uint64_t address = 0;  // in the peer
        std::size_t size = 0;
        std::byte* local = nullptr;
        Mapping() = default;
        Mapping(const Mapping&) = delete;
        Mapping& operator=(const Mapping&) = delete;
        ~Mapping();
    };
    using Keep = std::vector<std::shared_ptr<const Mapping>>;

    // What one peer may make us map on one connection (Budgets in shm_options.hpp).
    void limit(std::size_t max_bytes, std::size_t max_count) {
        max_bytes_ = max_bytes;
        max_count_ = max_count;
    }
    // Maps an offered region and takes over fd. 0, or -BMI_E* (the offer is then ignored:
    // copies of that memory go through the kernel as before): -BMI_ENOMEM when it would take
    // the peer past its budget of mapped bytes or regions.
    int add(const RegionMessage& offer, int fd);
    void remove(std::uint64_t id);
    // Our pointers for a list of the peer's memory if all of it lies in mapped regions;
    // false (and out empty) otherwise. keep receives the mappings used.
    bool translate(std::span<const RemoteIov> remote, std::vector<Segment>& out, Keep& keep) const;
    std::size_t size() const { return by_address_.size(); }
    std::size_t mapped_bytes() const { return mapped_bytes_; }

    // Offers up to this size are populated when mapped (their first copies then pay no page
    // faults); larger ones are mapped lazily, so a peer's offer never makes us allocate or
    // fault in more than the copies that name it touch.
    static constexpr std::size_t populate_limit = std::size_t{4} << 20;

private:
    void forget(const Mapping& mapping) { mapped_bytes_ -= mapping.size; }

    std::map<std::uint64_t, std::shared_ptr<const Mapping>> by_address_;  // by peer address
    std::size_t mapped_bytes_ = 0;
    std::size_t max_bytes_ = std::size_t{1} << 30;
    std::size_t max_count_ = 4096;
};

}  // namespace bmi::method::shm
