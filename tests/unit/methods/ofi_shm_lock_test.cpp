// SPDX-License-Identifier: LGPL-2.1-or-later
// ShmRegionLock (methods/ofi/ofi_shm_lock.hpp) on region files the test writes itself in the
// layout of libfabric 1.17's shm: which regions it looks at, the lock's two states, and how it
// tells a maker that runs from one that is gone.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "methods/ofi/ofi_shm.hpp"
#include "methods/ofi/ofi_shm_lock.hpp"

using bmi::method::ofi::shm_region_of_ended_process;
using bmi::method::ofi::ShmNameClaim;
using bmi::method::ofi::ShmRegionFile;
using bmi::method::ofi::ShmRegionLock;

namespace {
// A region file in /dev/shm with a version byte, a maker's pid and a spin lock where 1.17
// puts them; removed with the object.
class ScratchRegion {
public:
    ScratchRegion(std::uint8_t version, int pid, std::size_t size = 4096)
        : name_("bmi-unit-region-" + std::to_string(getpid())), path_("/dev/shm/" + name_) {
        const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(ftruncate(fd, static_cast<off_t>(size)) == 0);
        map_ =
            static_cast<std::byte*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        close(fd);
        REQUIRE(map_ != MAP_FAILED);
        size_ = size;
        map_[0] = std::byte{version};
        std::memcpy(map_ + 4, &pid, sizeof pid);
        if (size >= 28) pthread_spin_init(lock(), PTHREAD_PROCESS_SHARED);
    }
    ~ScratchRegion() {
        munmap(map_, size_);
        unlink(path_.c_str());
    }
    pthread_spinlock_t* lock() { return reinterpret_cast<pthread_spinlock_t*>(map_ + 24); }
    std::string address() const { return "ofi+shm://" + name_; }
    const std::string& name() const { return name_; }

private:
    std::string name_;
    std::string path_;
    std::byte* map_ = nullptr;
    std::size_t size_ = 0;
};

int gone_pid() {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);
    return child;
}
}  // namespace

TEST_CASE("ShmRegionLock looks only at regions of a layout whose lock it knows") {
    for (const std::uint8_t version : {4, 5}) {
        ScratchRegion region(version, getpid());
        CHECK(ShmRegionLock::open(region.address(), std::nullopt) != nullptr);
    }
    for (const std::uint8_t version : {3, 6, 8}) {
        ScratchRegion region(version, getpid());
        CHECK(ShmRegionLock::open(region.address(), std::nullopt) == nullptr);
    }
    ScratchRegion region(4, getpid());
    // Another file than the one the peer was greeted at is not the one the provider maps.
    struct stat st {};
    REQUIRE(stat(("/dev/shm/" + region.name()).c_str(), &st) == 0);
    const ShmRegionFile same{static_cast<std::uint64_t>(st.st_dev),
                             static_cast<std::uint64_t>(st.st_ino)};
    CHECK(ShmRegionLock::open(region.address(), same) != nullptr);
    CHECK(ShmRegionLock::open(region.address(), ShmRegionFile{same.device, same.inode + 1}) ==
          nullptr);
    CHECK(ShmRegionLock::open("ofi+shm://bmi-unit-no-such-region", std::nullopt) == nullptr);
    CHECK(ShmRegionLock::open("no scheme", std::nullopt) == nullptr);
}

TEST_CASE("ShmRegionLock: a file shorter than a page is no region") {
    ScratchRegion region(4, getpid(), 64);
    CHECK(ShmRegionLock::open(region.address(), std::nullopt) == nullptr);
}

TEST_CASE("ShmRegionLock sees a held lock, and whether the region's maker runs") {
    ScratchRegion region(4, getpid());
    auto look = ShmRegionLock::open(region.address(), std::nullopt);
    REQUIRE(look != nullptr);
    CHECK(look->free_soon());
    REQUIRE(pthread_spin_trylock(region.lock()) == 0);
    CHECK_FALSE(look->free_soon());
    CHECK(look->owner_alive(region.address()));  // our own pid
    pthread_spin_unlock(region.lock());
    CHECK(look->free_soon());
}

TEST_CASE("ShmRegionLock: a maker whose pid is gone runs only if its name is claimed") {
    ScratchRegion region(4, gone_pid());
    auto look = ShmRegionLock::open(region.address(), std::nullopt);
    REQUIRE(look != nullptr);
    CHECK_FALSE(look->owner_alive(region.address()));
    {
        // A process of another pid namespace that holds the name is alive.
        ShmNameClaim claim;
        REQUIRE(claim.hold(region.name()) == 0);
        CHECK(look->owner_alive(region.address()));
    }
    // The look let go of the name at once: it can be claimed again.
    ShmNameClaim again;
    CHECK(again.hold(region.name()) == 0);
}

TEST_CASE("ShmRegionLock: our own region's lock is taken back; a peer's is only looked at") {
    ScratchRegion region(4, getpid());
    REQUIRE(pthread_spin_trylock(region.lock()) == 0);
    auto peer = ShmRegionLock::open(region.address(), std::nullopt);
    REQUIRE(peer != nullptr);
    peer->take_back();
    CHECK_FALSE(peer->free_soon());
    auto own = ShmRegionLock::open_own(region.address());
    REQUIRE(own != nullptr);
    own->take_back();
    CHECK(own->free_soon());
    CHECK(pthread_spin_trylock(region.lock()) == 0);  // free as pthread sees it, too
}

TEST_CASE("A region whose maker has ended is found in /dev/shm") {
    ScratchRegion region(4, gone_pid());
    CHECK(shm_region_of_ended_process());
}
