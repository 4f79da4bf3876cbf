// SPDX-License-Identifier: LGPL-2.1-or-later
// The peers one method knows, owned by object and found by canonical address string, so that a
// lookup of an address already seen (or a proven peer that connected and announced it) yields
// the same Peer. Shared by the methods whose peers carry a `canonical` string (tcp, verbs);
// PeerNames, the name half with the binding rule for accepted connections, by every method.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "methods/method.hpp"

namespace bmi::method {

// The names peers answer to. Handle is how the table holds a peer: a plain pointer when the
// method owns its peers elsewhere (PeerRegistry), a weak_ptr when a peer lives only while the
// application or a connection holds it (shm).
template <class P, class Handle = P*>
class PeerNames {
public:
    using Found = std::conditional_t<std::is_pointer_v<Handle>, P*, std::shared_ptr<P>>;

    // The live peer that answers to name, or nullptr.
    Found find(const std::string& name) const {
        auto it = names_.find(name);
        if (it == names_.end()) return nullptr;
        if constexpr (std::is_pointer_v<Handle>)
            return it->second;
        else
            return it->second.lock();
    }

    // The one rule that binds an accepted connection (SPEC §6): it is a peer of its own, which
    // answers to the name it announced only once it proved the key, and never to a name that a
    // live peer already answers to (the application may hold that peer's address).
    bool may_take(const std::string& announced, bool proven) const {
        return proven && !announced.empty() && !find(announced);
    }

    // peer answers to name from now on, unless the name is empty or a live peer has it.
    void add(const std::string& name, Handle peer) {
        if (name.empty() || find(name)) return;
        names_.insert_or_assign(name, std::move(peer));
    }

    // Forgets name if it still means peer (or a peer that is gone).
    void remove(const std::string& name, const P& peer) {
        auto it = names_.find(name);
        if (it == names_.end()) return;
        const auto known = find(name);
        if (known == nullptr || &*known == &peer) names_.erase(it);
    }

    // Calls f(P&) for every live named peer.
    template <class F>
    void for_each_live(F&& f) const {
        for (const auto& [name, handle] : names_)
            if (auto peer = find(name)) f(*peer);
    }

private:
    std::unordered_map<std::string, Handle> names_;
};

template <class P>
class PeerRegistry {
public:
    // The peer with this canonical name, or nullptr.
    std::shared_ptr<P> named(const std::string& name) const {
        P* peer = names_.find(name);
        return peer == nullptr ? nullptr : by_object_.at(peer);
    }

    // Whether an accepted connection's peer may answer to the name it announced (PeerNames).
    bool may_take_name(const std::string& announced, bool proven) const {
        return names_.may_take(announced, proven);
    }

    // The owner of peer, or nullptr if it is not tracked (any more).
    std::shared_ptr<P> owner(P* peer) const {
        auto it = by_object_.find(peer);
        return it == by_object_.end() ? nullptr : it->second;
    }

    // Tracks peer, and its canonical name unless that is empty or taken.
    void add(const std::shared_ptr<P>& peer) {
        by_object_.emplace(peer.get(), peer);
        names_.add(peer->canonical, peer.get());
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
        if (!peer.canonical.empty()) names_.remove(peer.canonical, peer);
        by_object_.erase(&peer);
    }

    auto begin() { return by_object_.begin(); }
    auto end() { return by_object_.end(); }

private:
    std::unordered_map<P*, std::shared_ptr<P>> by_object_;
    PeerNames<P> names_;
};

}  // namespace bmi::method
