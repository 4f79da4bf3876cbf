// SPDX-License-Identifier: LGPL-2.1-or-later
// What libfabric's shm provider does not check for us before an endpoint opens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bmi::method::ofi {

// A claim on an shm name, held while its endpoint lives: an abstract unix socket named after
// it, which the kernel releases when the process dies, however it dies. So a region file that
// a dead process left (libfabric unlinks it only on a clean close) is known for what it is and
// removed, with a warning, rather than refusing the name for good or staying in /dev/shm.
// libfabric 1.17 answers a second endpoint of a live name by unlinking the first one's region,
// so its peers could no longer find it: the claim comes before the endpoint, and goes after it
// (declare it before the Fabric).
class ShmNameClaim {
public:
    ShmNameClaim() = default;
    ~ShmNameClaim();
    ShmNameClaim(const ShmNameClaim&) = delete;
    ShmNameClaim& operator=(const ShmNameClaim&) = delete;

    // A server's name: 0, or -BMI_EADDRINUSE with a warning if a live process holds `name`.
    int claim(std::string_view name);
    // A client's: the first name of shm_client_name's that no live process holds, in `name`.
    int claim_client_name(std::string& name);
    // Takes `name` without a word and without looking at its region: 0, or the errno of bind
    // (EADDRINUSE: a live process holds it).
    int hold(std::string_view name);

private:
    int fd_ = -1;
};

// Removes the regions in /dev/shm that ofi+shm clients of this user left when they ended
// without closing their endpoints (killed, or crashed): a client's name is never used again,
// so nobody else would. Only names of shm_client_name's form, of processes that are gone and
// whose claim nobody holds, are touched.
void remove_regions_of_dead_clients();

// Once per process: warns when the kernel refuses cross-memory attach (CMA) between unrelated
// processes (yama's ptrace_scope). libfabric's shm then copies large messages through its
// shared segments (it tries CMA per peer and falls back by itself): it works, but slower.
void note_cma_permission();

// The shm endpoints of this process, by address ("ofi+shm://NAME"). libfabric 1.17 reaches a
// peer in the same process through that peer's own mapping of its region, which the peer's
// close unmaps: a send to it after that writes into unmapped memory. So sends to such a peer
// ask first, and an instance marks its endpoint closed before it closes it.
enum class ShmEndpoint : std::uint8_t { elsewhere, open_here, closed_here };
void note_shm_endpoint(const std::string& address, bool open);
ShmEndpoint shm_endpoint(const std::string& address);

// Whether the endpoint at `address` ("ofi+shm://NAME") may still send to us: one of this
// process's that is open, or one elsewhere whose region is still in /dev/shm (libfabric
// unlinks it when the endpoint closes; a killed process's stays until it is swept).
bool shm_endpoint_may_send(const std::string& address);

// The region file of the shm endpoint at `address` ("ofi+shm://NAME") in /dev/shm, told apart
// from a later file of the same name (a process that opened the name anew), or nullopt if
// there is none. libfabric maps a peer's file once per address-vector entry.
// The name in "ofi+shm://NAME", and the path of its region in /dev/shm ("" for an address
// without a scheme).
std::string_view shm_name_of(std::string_view address);
std::string shm_region_path(std::string_view address);

struct ShmRegionFile {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    bool operator==(const ShmRegionFile&) const = default;
};
std::optional<ShmRegionFile> shm_region_file(const std::string& address);

}  // namespace bmi::method::ofi
