// SPDX-License-Identifier: LGPL-2.1-or-later
// The peers an shm instance knows (shm_peer_table.hpp).
#include "methods/shm/shm_peer_table.hpp"

#include <cstdlib>

namespace bmi::method::shm {

std::shared_ptr<ShmPeer> ShmPeerTable::lookup(const std::string& name) {
    if (name.rfind("pid-", 0) == 0) {
        // The rev_lookup form of a nameless peer: only meaningful while we know it.
        char* end = nullptr;
        const long pid = std::strtol(name.c_str() + 4, &end, 10);
        if (end != name.c_str() + 4 && *end == '\0' && pid > 0) {
            if (auto peer = nameless_.find_pid(static_cast<pid_t>(pid));
                peer && "pid-" + std::to_string(peer->pid) == name)
                return peer;
        }
    }
    auto peer = named_.find(name);
    if (!peer) {
        peer = std::make_shared<ShmPeer>();
        peer->name = name;
        named_.add(name, peer);
    }
    return peer;
}

std::shared_ptr<ShmPeer> ShmPeerTable::bind_hello(const Hello& hello, pid_t pid, bool proven) {
    const std::string announced(hello.name, hello.name_length);
    if (!named_.may_take(announced, proven)) {
        // A second connection of a proven instance that holds its name is that same peer.
        auto holder = named_.find(announced);
        if (proven && holder && holder->pid == pid && holder->nonce == hello.nonce) return holder;
        return nameless_.find_or_add(pid, hello.nonce);
    }
    auto peer = std::make_shared<ShmPeer>();
    peer->name = announced;
    peer->pid = pid;
    peer->nonce = hello.nonce;
    named_.add(announced, peer);
    return peer;
}

void ShmPeerTable::forget(const ShmPeer& peer) {
    if (!peer.name.empty()) named_.remove(peer.name, peer);
    nameless_.remove(peer);
}

void ShmPeerTable::drop_arrivals() {
    named_.for_each_live([](ShmPeer& peer) { peer.arrivals.clear(); });
    nameless_.for_each_live([](ShmPeer& peer) { peer.arrivals.clear(); });
}

}  // namespace bmi::method::shm
