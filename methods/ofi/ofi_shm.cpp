// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_shm.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bmi-types.h"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

int check_shm_name(std::string_view name) {
    const std::string path = "/dev/shm/" + std::string(name);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return 0;
    BMI_WARN("bmi_ofi: ofi+shm://%s is taken: %s exists (another server, or one that died: "
             "then remove the file)",
             std::string(name).c_str(), path.c_str());
    return -BMI_EADDRINUSE;
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
