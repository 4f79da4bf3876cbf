// SPDX-License-Identifier: LGPL-2.1-or-later
// The nameless peers of an shm method (shm_nameless_peers.hpp).
#include "methods/shm/shm_nameless_peers.hpp"

#include <algorithm>

namespace bmi::method::shm {

std::shared_ptr<ShmPeer> NamelessPeers::find_or_add(pid_t pid, std::uint64_t nonce) {
    auto& slot = peers_[Key{pid, nonce}];
    if (auto known = slot.lock()) return known;
    auto peer = std::make_shared<ShmPeer>();
    peer->pid = pid;
    peer->nonce = nonce;
    slot = peer;
    if (peers_.size() >= sweep_at_) sweep();
    return peer;
}

void NamelessPeers::remove(const ShmPeer& peer) {
    auto it = peers_.find(Key{peer.pid, peer.nonce});
    if (it == peers_.end()) return;
    auto known = it->second.lock();
    if (!known || known.get() == &peer) peers_.erase(it);
}

std::shared_ptr<ShmPeer> NamelessPeers::find_pid(pid_t pid) const {
    for (const auto& [key, weak] : peers_)
        if (key.pid == pid)
            if (auto peer = weak.lock()) return peer;
    return nullptr;
}

void NamelessPeers::sweep() {
    std::erase_if(peers_, [](const auto& entry) { return entry.second.expired(); });
    // Twice the survivors: the next sweep waits until as many entries again have come, so each
    // entry pays for a constant share of the walk.
    sweep_at_ = std::max(sweep_floor, 2 * peers_.size());
}

}  // namespace bmi::method::shm
