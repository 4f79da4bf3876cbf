// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared buffers on their own: allocation, a peer's mapping of them, and copies between
// segment lists that do not line up. One process plays both sides: the "peer" maps the
// memfd a second time, as another process would.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "bmi-types.h"
#include "methods/shm/shm_copy.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_region.hpp"

using namespace bmi::method;
using namespace bmi::method::shm;

namespace {
// The pool an instance gets from the shm rows' defaults.
PoolLimits default_pool() {
    Options options;
    REQUIRE(load_options(bmi::support::Settings{all_settings()}, 0, options) == 0);
    return options.pool;
}

RegionMessage offer_of(const OwnRegions::Region& region) {
    return {region_offer, 0, region.id, reinterpret_cast<std::uintptr_t>(region.base), region.size};
}
}  // namespace

TEST_CASE("regions: allocation, lookup by any range inside, release", "[shm][region]") {
    OwnRegions own(default_pool());
    auto* a = static_cast<char*>(own.allocate(100000));
    auto* b = static_cast<char*>(own.allocate(1));
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    OwnRegions::Region* ra = own.at(a);
    REQUIRE(ra != nullptr);
    CHECK(ra->size >= 100000);
    CHECK(ra->size % static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) == 0);
    CHECK(own.containing(a + 5, 1000) == ra);
    CHECK(own.containing(a, ra->size) == ra);
    CHECK(own.containing(a + 1, ra->size) == nullptr);  // runs past the end
    CHECK(own.containing(b, 1) == own.at(b));
    CHECK(own.at(a + 4096) == nullptr);  // only the base names a region
    int seals = fcntl(ra->fd, F_GET_SEALS);
    CHECK((seals & F_SEAL_SHRINK) != 0);
    std::memset(a, 'a', 100000);
    own.release(*ra);
    CHECK(own.at(a) == nullptr);
    CHECK(own.containing(a, 1) == nullptr);
}

TEST_CASE("regions: the peer's mapping sees the owner's bytes; unknown memory stays unmapped",
          "[shm][region]") {
    OwnRegions own(default_pool());
    auto* data = static_cast<char*>(own.allocate(3 << 20));
    REQUIRE(data != nullptr);
    OwnRegions::Region& region = *own.at(data);
    PeerRegions peer;
    REQUIRE(peer.add(offer_of(region), dup(region.fd)) == 0);
    REQUIRE(peer.size() == 1);

    std::memcpy(data + 12345, "shared", 6);
    std::vector<RemoteIov> inside{{reinterpret_cast<std::uintptr_t>(data) + 12345, 6},
                                  {reinterpret_cast<std::uintptr_t>(data), 1}};
    std::vector<Segment> local;
    PeerRegions::Keep keep;
    REQUIRE(peer.translate(inside, local, keep));
    REQUIRE(local.size() == 2);
    CHECK(local[0].data != data + 12345);  // a mapping of its own
    CHECK(std::memcmp(local[0].data, "shared", 6) == 0);
    static_cast<char*>(local[1].data)[0] = 'w';  // and it writes through
    CHECK(data[0] == 'w');

    char elsewhere[16];
    std::vector<RemoteIov> mixed{inside[0], {reinterpret_cast<std::uintptr_t>(elsewhere), 16}};
    CHECK_FALSE(peer.translate(mixed, local, keep));
    CHECK(local.empty());
    std::vector<RemoteIov> past_end{{reinterpret_cast<std::uintptr_t>(data) + region.size - 8, 16}};
    CHECK_FALSE(peer.translate(past_end, local, keep));

    // A withdrawn region is no longer looked up, but a copy holding it keeps its pages.
    REQUIRE(peer.translate(inside, local, keep));
    peer.remove(region.id);
    CHECK(peer.size() == 0);
    CHECK(std::memcmp(local[0].data, "shared", 6) == 0);  // still mapped: keep holds it
    std::vector<Segment> again;
    PeerRegions::Keep none;
    CHECK_FALSE(peer.translate(inside, again, none));
}

TEST_CASE("regions: an offer that could shrink under a copy is refused", "[shm][region]") {
    int fd = memfd_create("bmi-test-unsealed", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 1 << 20) == 0);
    PeerRegions peer;
    RegionMessage offer{region_offer, 0, 7, 0x10000000, 1 << 20};
    CHECK(peer.add(offer, fd) == -BMI_EINVAL);  // fd is closed either way
    CHECK(peer.size() == 0);

    OwnRegions own(default_pool());
    void* data = own.allocate(1 << 20);
    REQUIRE(data != nullptr);
    RegionMessage too_big = offer_of(*own.at(data));
    too_big.size *= 2;  // claims more than the memfd holds
    CHECK(peer.add(too_big, dup(own.at(data)->fd)) == -BMI_EINVAL);
}

TEST_CASE("regions: copies between segment lists of different shapes", "[shm][region]") {
    std::vector<char> source(1000);
    std::iota(source.begin(), source.end(), 0);
    std::vector<char> target(1000, 0);
    // 300 + 0 + 700 from, 1 + 999 to; copy bytes 250..849.
    std::vector<Segment> from{{source.data(), 300}, {nullptr, 0}, {source.data() + 300, 700}};
    std::vector<Segment> to{{target.data(), 1}, {target.data() + 1, 999}};
    copy_between(to, from, 250, 600);
    for (int i = 0; i < 1000; ++i) {
        char want = i >= 250 && i < 850 ? static_cast<char>(i) : 0;
        REQUIRE(target[static_cast<std::size_t>(i)] == want);
    }
}

TEST_CASE("regions: a peer's offers stop at its budget of regions and bytes", "[shm][region]") {
    OwnRegions own(default_pool());
    void* first = own.allocate(1 << 20);
    void* second = own.allocate(1 << 20);
    REQUIRE((first != nullptr && second != nullptr));
    SECTION("regions") {
        PeerRegions peer;
        peer.limit(std::size_t{1} << 30, 1);
        CHECK(peer.add(offer_of(*own.at(first)), dup(own.at(first)->fd)) == 0);
        CHECK(peer.add(offer_of(*own.at(second)), dup(own.at(second)->fd)) == -BMI_ENOMEM);
        // A withdrawal makes room again.
        peer.remove(own.at(first)->id);
        CHECK(peer.add(offer_of(*own.at(second)), dup(own.at(second)->fd)) == 0);
    }
    SECTION("bytes") {
        PeerRegions peer;
        peer.limit((1 << 20) + 4096, 16);
        CHECK(peer.add(offer_of(*own.at(first)), dup(own.at(first)->fd)) == 0);
        CHECK(peer.add(offer_of(*own.at(second)), dup(own.at(second)->fd)) == -BMI_ENOMEM);
        CHECK(peer.mapped_bytes() == 1 << 20);
        // The same region again replaces itself: still within budget.
        CHECK(peer.add(offer_of(*own.at(first)), dup(own.at(first)->fd)) == 0);
        CHECK(peer.mapped_bytes() == 1 << 20);
    }
}

TEST_CASE("regions: freed regions return by size class, within the pool's limits",
          "[shm][region][pool]") {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    CHECK(OwnRegions::class_size(18000) == 32768);
    CHECK(OwnRegions::class_size(57000) == 65536);
    CHECK(OwnRegions::class_size(OwnRegions::max_pooled_class) == OwnRegions::max_pooled_class);
    // Above the largest power-of-two class a region keeps its page-rounded size.
    CHECK(OwnRegions::class_size(OwnRegions::max_pooled_class + 1) ==
          OwnRegions::max_pooled_class + page);

    OwnRegions own(PoolLimits{std::size_t{160} << 10, 2});
    auto* a = static_cast<char*>(own.allocate(40000));
    auto* b = static_cast<char*>(own.allocate(50000));
    auto* c = static_cast<char*>(own.allocate(60000));
    REQUIRE((a != nullptr && b != nullptr && c != nullptr));
    std::memcpy(a, "old", 3);
    REQUIRE(own.recycle(*own.at(a)));
    REQUIRE(own.recycle(*own.at(b)));
    CHECK_FALSE(own.recycle(*own.at(c)));  // a third of its class: over the per-class count
    CHECK(own.pooled_bytes() == std::size_t{128} << 10);
    // Pooled memory is no longer the application's.
    CHECK(own.at(a) == nullptr);
    CHECK(own.containing(a, 1) == nullptr);
    own.release(*own.at(c));
    // The last one freed comes back first, with its bytes as they were.
    CHECK(own.allocate(33000) == b);
    auto* again = static_cast<char*>(own.allocate(65536));
    CHECK(again == a);
    CHECK(std::memcmp(again, "old", 3) == 0);
    CHECK(own.pooled_bytes() == 0);
    // Over the byte cap: a 128 KiB region does not fit beside a pooled 64 KiB one.
    auto* big = own.allocate(100000);
    REQUIRE(own.recycle(*own.at(again)));
    CHECK_FALSE(own.recycle(*own.at(big)));
    own.release(*own.at(big));
    // Regions larger than the last class are pooled by their exact size.
    auto* large = own.allocate(OwnRegions::max_pooled_class + 1);
    OwnRegions huge_pool(PoolLimits{std::size_t{64} << 20, 1});
    auto* h = huge_pool.allocate(OwnRegions::max_pooled_class + 1);
    REQUIRE(huge_pool.recycle(*huge_pool.at(h)));
    CHECK(huge_pool.allocate(OwnRegions::max_pooled_class + 2 * page) != h);
    CHECK(huge_pool.allocate(OwnRegions::max_pooled_class + page) == h);
    own.release(*own.at(large));
}

// A pooled region can outlive many connections; a closed one is dropped from every region's
// list of peers that have it, live or pooled, so the lists stay as long as the live peers.
TEST_CASE("regions: a closed connection is forgotten by every region", "[shm][region][pool]") {
    OwnRegions own(default_pool());
    void* live = own.allocate(40000);
    void* pooled = own.allocate(40000);
    REQUIRE((live != nullptr && pooled != nullptr));
    own.at(live)->offered = {1, 2};
    OwnRegions::Region* region = own.at(pooled);
    region->offered = {2, 3};
    REQUIRE(own.recycle(*region));
    own.forget_connection(2);
    CHECK(own.at(live)->offered == std::set<std::uint64_t>{1});
    CHECK(region->offered == std::set<std::uint64_t>{3});
}

// A receive whose sender outlived it (shm_split.cpp, wait_for_sender) retires its buffer: the
// late chunks may still land there, so it never becomes another allocation's memory.
TEST_CASE("regions: a retired region is not pooled", "[shm][region][pool]") {
    OwnRegions own(default_pool());
    auto* late = static_cast<char*>(own.allocate(40000));
    REQUIRE(late != nullptr);
    own.containing(late + 100, 10)->retired = true;
    OwnRegions::Region* region = own.at(late);
    CHECK_FALSE(own.recycle(*region));
    own.release(*region);
    CHECK(own.pooled_bytes() == 0);
    void* next = own.allocate(40000);
    REQUIRE(next != nullptr);
    CHECK(own.at(next)->retired == false);
    own.release(*own.at(next));
}
