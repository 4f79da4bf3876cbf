// SPDX-License-Identifier: LGPL-2.1-or-later
// The peers one method knows, owned by object and found by canonical address string, so that a
// lookup of an address already seen (or a peer that connected and announced it) yields the same
// Peer. Shared by the methods whose peers carry a `canonical` string (tcp, verbs).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "methods/method.hpp"

namespace bmi::method {

template <class P>
class PeerRegistry {
public:
    // The peer with this canonical name, or nullptr.
    std::shared_ptr<P> named(const std::string& name) const {
        auto it = by_name_.find(name);
        return it == by_name_.end() ? nullptr : by_object_.at(it->second);
    }

    // The owner of peer, or nullptr if it is not tracked (any more).
    std::shared_ptr<P> owner(P* peer) const {
        auto it = by_object_.find(peer);
        return it == by_object_.end() ? nullptr : it->second;
    }

    // Tracks peer, and its canonical name unless that is empty or taken.
    void add(const std::shared_ptr<P>& peer) {
        by_object_.emplace(peer.get(), peer);
        if (!peer->canonical.empty()) by_name_.emplace(peer->canonical, peer.get());
    }

    // The peer an operation names. One the method forgot (BMI_DROP_ADDR) while the
    // application still posts to it is tracked again, so teardown sees it. nullptr if the
    // op's peer is not of this method.
    std::shared_ptr<P> adopt(const Operation& op) {
        auto* raw = static_cast<P*>(op.peer);
        if (raw == nullptr) return nullptr;
        if (auto known = owner(raw)) return known;
        auto peer = std::static_pointer_cast<P>(op.peer_ref);
        if (peer.get() != raw) return nullptr;
        add(peer);
        return peer;
    }

    // Stops tracking peer (its name too, if the name still means this peer).
    void remove(P& peer) {
        if (!peer.canonical.empty()) {
            auto it = by_name_.find(peer.canonical);
            if (it != by_name_.end() && it->second == &peer) by_name_.erase(it);
        }
        by_object_.erase(&peer);
    }

    auto begin() { return by_object_.begin(); }
    auto end() { return by_object_.end(); }

private:
    std::unordered_map<P*, std::shared_ptr<P>> by_object_;
    std::unordered_map<std::string, P*> by_name_;
};

}  // namespace bmi::method
