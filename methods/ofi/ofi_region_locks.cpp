// SPDX-License-Identifier: LGPL-2.1-or-later
// shm: the spin locks in regions that libfabric 1.17 takes without a bound (ShmRegionLock). A
// call that would take one that a dead process holds is not made: a peer that died holding
// its own is lost; while ours is held nothing is read, and once it has been held for a second
// while a process that used shm has ended without closing, we take it back.
#include <chrono>

#include "methods/ofi/ofi_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

namespace {
// A live holder keeps a region's lock for microseconds; one stopped inside its section (a
// debugger, SIGSTOP) for longer, and only then is a lock taken back from under it.
constexpr std::chrono::milliseconds take_back_after{1000};
}  // namespace

int OfiMethod::region_admits(fi_addr_t addr) {
    if (!region_locks_.own) return 0;  // not shm, or a layout without the lock
    auto peer = peer_at(addr);
    return peer ? region_admits(*peer) : 0;
}

int OfiMethod::region_admits(OfiPeer& peer) {
    if (!region_locks_.own) return 0;
    if (!peer.region_lock_opened) {
        peer.region_lock = ShmRegionLock::open(peer.endpoint, peer.region);
        peer.region_lock_opened = true;
    }
    if (!peer.region_lock || peer.region_lock->free_soon()) return 0;
    if (peer.region_lock->owner_alive(peer.endpoint))
        return -FI_EAGAIN;  // waited for as any slow peer
    if (std::find(region_locks_.dead_holders_found.begin(), region_locks_.dead_holders_found.end(),
                  peer.fi_addr) == region_locks_.dead_holders_found.end()) {
        region_locks_.dead_holders_found.push_back(peer.fi_addr);
        ++counted_.dead_holders;
    }
    return -FI_ECONNRESET;
}

void OfiMethod::lose_dead_holders() {
    std::vector<fi_addr_t> found;
    found.swap(region_locks_.dead_holders_found);
    for (fi_addr_t addr : found) {
        auto peer = peer_at(addr);
        if (!peer || peer->lost) continue;
        BMI_LOG(error, "bmi_ofi: %s ended holding its region's lock: what waits on it fails",
                peer->address.c_str());
        lose(*peer, -BMI_ECONNRESET);
    }
}

bool OfiMethod::own_region_free() {
    if (!region_locks_.own) return true;
    if (region_locks_.own->free_soon()) {
        region_locks_.own_held_since.reset();
        return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!region_locks_.own_held_since) {
        region_locks_.own_held_since = now;
        BMI_LOG(error,
                "bmi_ofi: %s: our region's lock stays held: nothing is read until it is free",
                own_endpoint_.c_str());
        return false;
    }
    if (now - *region_locks_.own_held_since < take_back_after) return false;
    region_locks_.own_held_since = now;  // the next look at the evidence, a bound later
    if (!ended_holder_seen()) return false;
    region_locks_.own->take_back();
    region_locks_.own_held_since.reset();
    ++counted_.locks_taken_back;
    BMI_LOG(error,
            "bmi_ofi: %s: took back our region's lock, held for %lld ms while a process that used "
            "shm has ended without closing",
            own_endpoint_.c_str(), static_cast<long long>(take_back_after.count()));
    return true;
}

bool OfiMethod::ended_holder_seen() const {
    // A peer of ours that ended (a server killed inside its answer to us), or any endpoint
    // that left its region behind (a client killed inside its request to us).
    for (const auto& [addr, peer] : peers_)
        if (peer->region_lock && !peer->region_lock->maker_runs()) return true;
    return shm_region_of_ended_process();
}

}  // namespace bmi::method::ofi
