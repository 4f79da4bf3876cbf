// SPDX-License-Identifier: LGPL-2.1-or-later
// The spin lock in an ofi+shm endpoint's region as libfabric 1.17-1.19 lays it out
// (methods/ofi/ofi_shm_lock.hpp): a test takes it to play a process that ended holding it.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "methods/ofi/ofi_shm.hpp"

namespace bmi::test {

// Takes (or, with take false, releases) the lock of the region of `address`
// ("ofi+shm://NAME"): false if there is no such region, or its layout is not one whose lock
// is known (the case is then skipped), or the lock is held already.
inline bool set_region_lock(const std::string& address, bool take) {
    const std::string path = method::ofi::shm_region_path(address);
    if (path.empty()) return false;
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return false;
    constexpr std::size_t length = 4096;
    void* map = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return false;
    auto* head = static_cast<std::byte*>(map);
    const auto version = static_cast<std::uint8_t>(head[0]);
    // version, resv, flags, pid, two capability bytes, max_sar_buf_per_peer, base_addr
    auto* lock = reinterpret_cast<pthread_spinlock_t*>(head + 24);
    bool done = false;
    if (version == 4 || version == 5) {
        // Released by making it anew: this mapping is not the one it was taken through, and
        // ThreadSanitizer tells locks by address.
        if (take)
            done = pthread_spin_trylock(lock) == 0;
        else
            done = pthread_spin_init(lock, PTHREAD_PROCESS_SHARED) == 0;
    }
    munmap(map, length);
    return done;
}

}  // namespace bmi::test
