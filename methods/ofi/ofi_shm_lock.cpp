// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_shm_lock.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "support/spin/poll_spacing.hpp"

namespace bmi::method::ofi {

namespace {
// struct smr_region of libfabric 1.17-1.19 (include/ofi_shm.h): version, resv, flags, pid,
// two capability bytes, max_sar_buf_per_peer, base_addr, then the pthread_spinlock_t.
constexpr std::size_t version_offset = 0;
constexpr std::size_t pid_offset = 4;
constexpr std::size_t lock_offset = 24;
constexpr std::uint8_t first_known_version = 4;
constexpr std::uint8_t last_known_version = 5;
// A live holder keeps the lock for a copy of at most one inject buffer; a holder that is
// descheduled takes longer, and is then waited for as any slow peer is.
constexpr auto live_hold = std::chrono::microseconds(50);

// What a free pthread spin lock holds: 1 with glibc's x86-64 lock, 0 with its generic one.
int free_lock_value() {
    static const int value = [] {
        pthread_spinlock_t lock;
        pthread_spin_init(&lock, PTHREAD_PROCESS_SHARED);
        const int free_value = static_cast<int>(lock);
        pthread_spin_destroy(&lock);
        return free_value;
    }();
    return value;
}

bool pid_runs(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }
}  // namespace

std::unique_ptr<ShmRegionLock> ShmRegionLock::open(const std::string& address,
                                                   const std::optional<ShmRegionFile>& file) {
    return map_region(address, file, false);
}

std::unique_ptr<ShmRegionLock> ShmRegionLock::open_own(const std::string& address) {
    return map_region(address, std::nullopt, true);
}

std::unique_ptr<ShmRegionLock> ShmRegionLock::map_region(const std::string& address,
                                                         const std::optional<ShmRegionFile>& file,
                                                         bool writable) {
    const std::string path = shm_region_path(address);
    if (path.empty()) return nullptr;
    const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st {};
    const std::size_t length = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= length &&
        (!file || (file->device == static_cast<std::uint64_t>(st.st_dev) &&
                   file->inode == static_cast<std::uint64_t>(st.st_ino))))
        map =
            mmap(nullptr, length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return nullptr;
    const auto version = static_cast<const std::uint8_t*>(map)[version_offset];
    if (version < first_known_version || version > last_known_version) {
        munmap(map, length);
        return nullptr;
    }
    return std::unique_ptr<ShmRegionLock>(new ShmRegionLock(map, length, writable));
}

ShmRegionLock::ShmRegionLock(void* map, std::size_t length, bool writable)
    : map_(map), length_(length), writable_(writable) {}

ShmRegionLock::~ShmRegionLock() { munmap(map_, length_); }

std::atomic<int>& ShmRegionLock::word() const {
    static_assert(sizeof(std::atomic<int>) == sizeof(pthread_spinlock_t) &&
                  std::atomic<int>::is_always_lock_free);
    return *reinterpret_cast<std::atomic<int>*>(static_cast<std::byte*>(map_) + lock_offset);
}

bool ShmRegionLock::free_soon() const {
    const int free_value = free_lock_value();
    if (word().load(std::memory_order_relaxed) == free_value) return true;
    // A holder on another CPU lets go within a few polls; one that shares ours needs the CPU.
    constexpr int polls = 64;
    for (int i = 0; i < polls; ++i) {
        support::poll_pause();
        if (word().load(std::memory_order_relaxed) == free_value) return true;
    }
    const auto until = std::chrono::steady_clock::now() + live_hold;
    do {
        std::this_thread::yield();
        if (word().load(std::memory_order_relaxed) == free_value) return true;
    } while (std::chrono::steady_clock::now() < until);
    return false;
}

bool ShmRegionLock::maker_runs() const {
    int pid = 0;
    std::memcpy(&pid, static_cast<const std::byte*>(map_) + pid_offset, sizeof pid);
    return pid_runs(pid);
}

void ShmRegionLock::take_back() {
    if (writable_) word().store(free_lock_value(), std::memory_order_release);
}

bool ShmRegionLock::owner_alive(const std::string& address) const {
    // The pid alone may be another process's by now, or not visible from our namespace: a pid
    // that is gone is checked against the name's claim.
    if (maker_runs()) return true;
    const std::string_view name = shm_name_of(address);
    if (name.empty()) return true;
    ShmNameClaim probe;
    // Holding the name for a moment says that nobody else does; the claim goes at once.
    return probe.hold(name) != 0;
}

bool shm_region_of_ended_process() {
    DIR* directory = opendir("/dev/shm");
    if (directory == nullptr) return false;
    bool found = false;
    const uid_t uid = getuid();
    while (!found) {
        const dirent* entry = readdir(directory);
        if (entry == nullptr) break;
        if (entry->d_type != DT_REG && entry->d_type != DT_UNKNOWN) continue;
        const int fd = openat(dirfd(directory), entry->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        struct stat st {};
        std::uint8_t head[pid_offset + sizeof(int)] = {};
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid &&
            pread(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head) &&
            head[version_offset] >= first_known_version &&
            head[version_offset] <= last_known_version) {
            int pid = 0;
            std::memcpy(&pid, head + pid_offset, sizeof pid);
            found = pid > 0 && !pid_runs(pid);
        }
        close(fd);
    }
    closedir(directory);
    return found;
}

}  // namespace bmi::method::ofi
