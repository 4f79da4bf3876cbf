// SPDX-License-Identifier: LGPL-2.1-or-later
// The peers an shm instance knows, and the rule that binds an accepted connection to one.
//
// Its own object because the rule (PeerNames::may_take, the kit's, as on every method) is the
// one place that decides whether a process may answer to a name: named peers are the ones
// the application looked up or that proved the key; every other process is nameless, found
// by the (pid, nonce) of its hello.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "methods/peer_registry.hpp"
#include "methods/shm/shm_nameless_peers.hpp"
#include "methods/shm/shm_peer.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

class ShmPeerTable {
public:
    // The peer of a listen name, known or new; "pid-N" (what rev_lookup gives for a nameless
    // peer) finds that peer while we know it.
    std::shared_ptr<ShmPeer> lookup(const std::string& name);
    // The peer of an accepted connection: the instance that said hello (its pid is the
    // kernel's word), named only if `proven` (it proved the key) and nobody holds the name.
    std::shared_ptr<ShmPeer> bind_hello(const Hello& hello, pid_t pid, bool proven);
    // Forgets peer (BMI_DROP_ADDR); other entries stay.
    void forget(const ShmPeer& peer);
    // The method is going: every peer drops the messages it kept.
    void drop_arrivals();

private:
    PeerNames<ShmPeer, std::weak_ptr<ShmPeer>> named_;  // looked up, or proven peers
    NamelessPeers nameless_;
};

}  // namespace bmi::method::shm
