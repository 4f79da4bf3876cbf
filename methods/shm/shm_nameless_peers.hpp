// SPDX-License-Identifier: LGPL-2.1-or-later
// The nameless peers of an shm method (instances that connected without a listen name), found
// by the (pid, nonce) of their hello in constant time. A server holds one for every client
// whose address it keeps; searching a list of them on every hello would make each new
// connection cost as much as all the clients held (doc/perf/code-figures.md).
// Entries are weak: a peer lives while its address or a connection holds it. Expired entries
// are swept when the table has doubled since the last sweep, so they cost amortised constant
// time and never more than the live ones plus a small floor.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "methods/shm/shm_peer.hpp"

namespace bmi::method::shm {

class NamelessPeers {
public:
    // The live peer that said hello with this pid and nonce (a second connection of the same
    // instance), or a new one, with pid and nonce set, that the table now knows.
    std::shared_ptr<ShmPeer> find_or_add(pid_t pid, std::uint64_t nonce);
    // Forgets peer (BMI_DROP_ADDR); other entries stay.
    void remove(const ShmPeer& peer);
    // The live peer of process pid, for the "shm://pid-N" form rev_lookup gives; rare, so a
    // walk.
    std::shared_ptr<ShmPeer> find_pid(pid_t pid) const;
    // Calls f(ShmPeer&) for every live peer.
    template <class F>
    void for_each_live(F&& f) const {
        for (const auto& [key, weak] : peers_)
            if (auto peer = weak.lock()) f(*peer);
    }
    // Entries, live or not yet swept.
    std::size_t size() const { return peers_.size(); }

private:
    struct Key {
        pid_t pid;
        std::uint64_t nonce;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const {
            return std::hash<std::uint64_t>{}(k.nonce ^ (static_cast<std::uint64_t>(k.pid) << 32));
        }
    };
    void sweep();

    static constexpr std::size_t sweep_floor = 64;
    std::unordered_map<Key, std::weak_ptr<ShmPeer>, KeyHash> peers_;
    std::size_t sweep_at_ = sweep_floor;  // sweep when the table reaches this size
};

}  // namespace bmi::method::shm
