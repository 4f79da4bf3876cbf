// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_shm.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bmi-types.h"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

ShmNameClaim::~ShmNameClaim() {
    if (fd_ >= 0) close(fd_);
}

int ShmNameClaim::claim(std::string_view name) {
    int owner = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (owner < 0) return -BMI_ENOMEM;
    sockaddr_un claim{};
    claim.sun_family = AF_UNIX;
    const std::string tag = "bmi-ofi-shm/" + std::string(name);
    const std::size_t length = std::min(tag.size(), sizeof claim.sun_path - 1);
    std::memcpy(claim.sun_path + 1, tag.data(), length);  // sun_path[0] == 0: abstract
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
    const std::string path = "/dev/shm/" + std::string(name);
    if (bind(owner, reinterpret_cast<const sockaddr*>(&claim), size) != 0) {
        const int error = errno;
        close(owner);
        if (error != EADDRINUSE) return -BMI_ENOMEM;
        BMI_WARN("bmi_ofi: ofi+shm://%s is taken by a running server", std::string(name).c_str());
        return -BMI_EADDRINUSE;
    }
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
        BMI_WARN("bmi_ofi: ofi+shm://%s: removing %s, which a server that died left behind",
                 std::string(name).c_str(), path.c_str());
        if (unlink(path.c_str()) != 0 && errno != ENOENT) {
            close(owner);
            return -BMI_EADDRINUSE;
        }
    }
    fd_ = owner;
    return 0;
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

}  // namespace bmi::method::ofi
