// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_shm.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "bmi-types.h"
#include "methods/ofi/ofi_address.hpp"
#include "support/local_socket/abstract_address.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

ShmNameClaim::~ShmNameClaim() {
    if (fd_ >= 0) close(fd_);
}

namespace {
constexpr std::string_view claim_prefix = "bmi-ofi-shm/";

// Removes the region of `name` that a process which has died left behind.
int remove_left_region(std::string_view name) {
    const std::string path = "/dev/shm/" + std::string(name);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return 0;
    BMI_WARN("bmi_ofi: ofi+shm://%s: removing %s, which a process that died left behind",
             std::string(name).c_str(), path.c_str());
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return -BMI_EADDRINUSE;
    return 0;
}

// The pid in a name of shm_client_name's form ("bmi-PID-N"), or 0.
pid_t client_name_pid(std::string_view name) {
    constexpr std::string_view prefix = "bmi-";
    if (!name.starts_with(prefix)) return 0;
    name.remove_prefix(prefix.size());
    long pid = 0;
    unsigned index = 0;
    auto [pid_end, pid_error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (pid_error != std::errc() || pid <= 0 || pid_end == name.data() + name.size() ||
        *pid_end != '-')
        return 0;
    const char* end = name.data() + name.size();
    auto [index_end, index_error] = std::from_chars(pid_end + 1, end, index);
    if (index_error != std::errc() || index_end != end) return 0;
    return static_cast<pid_t>(pid);
}
}  // namespace

int ShmNameClaim::hold(std::string_view name) {
    const auto address = support::abstract_address(std::string(claim_prefix) + std::string(name));
    if (!address) return ENAMETOOLONG;
    int owner = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (owner < 0) return errno;
    if (bind(owner, reinterpret_cast<const sockaddr*>(&address->address), address->length) != 0) {
        const int error = errno;
        close(owner);
        return error;
    }
    if (fd_ >= 0) close(fd_);
    fd_ = owner;
    return 0;
}

int ShmNameClaim::claim(std::string_view name) {
    int error = hold(name);
    // A peer that asks whether the name's last process is gone holds it for a moment
    // (ShmRegionLock::owner_alive): a few tries tell that from a running server.
    for (int retry = 0; error == EADDRINUSE && retry < 3; ++retry) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        error = hold(name);
    }
    if (error == EADDRINUSE) {
        BMI_WARN("bmi_ofi: ofi+shm://%s is taken by a running server", std::string(name).c_str());
        return -BMI_EADDRINUSE;
    }
    if (error == ENAMETOOLONG) {
        BMI_WARN("bmi_ofi: ofi+shm://%s: the name is too long", std::string(name).c_str());
        return -BMI_EINVAL;
    }
    if (error != 0) return -BMI_ENOMEM;
    return remove_left_region(name);
}

int ShmNameClaim::claim_client_name(std::string& name) {
    // A name is held by someone else only while a process of a reused pid ran here before, or
    // while another process checks whether ours is left over: the next one is free.
    for (int attempt = 0; attempt < 64; ++attempt) {
        name = shm_client_name();
        const int error = hold(name);
        if (error == EADDRINUSE) continue;
        if (error != 0) return -BMI_ENOMEM;
        return remove_left_region(name);
    }
    return -BMI_EADDRINUSE;
}

void remove_regions_of_dead_clients() {
    DIR* directory = opendir("/dev/shm");
    if (directory == nullptr) return;
    const uid_t self = geteuid();
    while (const dirent* entry = readdir(directory)) {
        const std::string_view name = entry->d_name;
        const pid_t pid = client_name_pid(name);
        // Alive, or not ours to ask (EPERM): its region may be in use.
        if (pid == 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st {};
        if (fstatat(dirfd(directory), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != self)
            continue;
        // The claim is free only if no live process (in any pid namespace) holds the name.
        ShmNameClaim probe;
        if (probe.hold(name) != 0) continue;
        if (unlinkat(dirfd(directory), entry->d_name, 0) == 0)
            BMI_WARN("bmi_ofi: removed /dev/shm/%s, which ofi+shm client %d left when it ended "
                     "without closing its endpoint",
                     entry->d_name, static_cast<int>(pid));
    }
    closedir(directory);
}

void note_cma_permission() {
    static std::once_flag once;
    std::call_once(once, [] {
        const char* disabled = std::getenv("FI_SHM_DISABLE_CMA");
        if (disabled != nullptr && *disabled != '\0' && *disabled != '0') return;  // asked for
        std::ifstream file("/proc/sys/kernel/yama/ptrace_scope");
        int scope = 0;
        if (!(file >> scope) || scope == 0) return;
        BMI_WARN("bmi_ofi: kernel.yama.ptrace_scope is %d, so libfabric's shm cannot use "
                 "cross-memory attach between unrelated processes; it copies large messages "
                 "through shared memory instead (slower). Set ptrace_scope to 0, or "
                 "FI_SHM_DISABLE_CMA=1 to silence this.",
                 scope);
    });
}

namespace {
std::mutex endpoints_lock;
// Every endpoint this process opened stays listed: a name can belong to one process only.
std::unordered_map<std::string, bool>& endpoints() {
    static std::unordered_map<std::string, bool> open_by_address;
    return open_by_address;
}
}  // namespace

void note_shm_endpoint(const std::string& address, bool open) {
    std::lock_guard lock(endpoints_lock);
    endpoints()[address] = open;
}

ShmEndpoint shm_endpoint(const std::string& address) {
    std::lock_guard lock(endpoints_lock);
    auto it = endpoints().find(address);
    if (it == endpoints().end()) return ShmEndpoint::elsewhere;
    return it->second ? ShmEndpoint::open_here : ShmEndpoint::closed_here;
}

bool shm_endpoint_may_send(const std::string& address) {
    switch (shm_endpoint(address)) {
        case ShmEndpoint::open_here:
            return true;
        case ShmEndpoint::closed_here:
            return false;
        case ShmEndpoint::elsewhere:
            break;
    }
    return shm_region_file(address).has_value();
}

std::string_view shm_name_of(std::string_view address) {
    const std::size_t at = address.find("://");
    return at == std::string_view::npos ? std::string_view() : address.substr(at + 3);
}

std::string shm_region_path(std::string_view address) {
    const std::string_view name = shm_name_of(address);
    return name.empty() ? std::string() : "/dev/shm/" + std::string(name);
}

std::optional<ShmRegionFile> shm_region_file(const std::string& address) {
    const std::string path = shm_region_path(address);
    if (path.empty()) return std::nullopt;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return std::nullopt;
    return ShmRegionFile{static_cast<std::uint64_t>(st.st_dev),
                         static_cast<std::uint64_t>(st.st_ino)};
}

}  // namespace bmi::method::ofi
