// SPDX-License-Identifier: LGPL-2.1-or-later
// A remote shm endpoint and the matching state that belongs to it rather than to a connection.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "methods/arrivals_by_tag.hpp"
#include "methods/early_budget.hpp"
#include "methods/method.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/op_queue/op_queue.hpp"

namespace bmi::method::shm {

using OpList = support::OpQueue<Operation, SafeHook, &Operation::method_hook>;

// A message that arrived before a matching receive was posted.
struct Arrival {
    MsgType type = MsgType::eager;  // eager (payload buffered) or rts (waits for a receive)
    bmi_msg_tag_t tag = 0;
    bmi_size_t size = 0;
    std::vector<std::byte> payload;  // eager only; size is bounded by the eager limit
    std::vector<RemoteIov> iovs;     // rts only; empty means "use the two-copy path"
    std::uint64_t cookie = 0;        // rts only
    std::uint64_t connection = 0;    // rts only: the connection that must carry the reply
};

// Matching is per peer (not per connection) so messages and receives meet however many
// connections the two instances happen to have open at once.
class ShmPeer final : public Peer {
public:
    std::string name;                 // listen name it announced or we looked up; "" if none
    pid_t pid = 0;                    // 0 until a connection told us
    std::uint64_t nonce = 0;          // with pid, identifies a nameless instance across reconnects
    std::uint64_t connection = 0;     // id of the connection sends use; 0 when none is open
    ArrivalsByTag<Arrival> arrivals;  // messages waiting for a receive, by tag
    // What arrivals holds against the early-message budget (ShmMethod::early_).
    EarlyBudget::Account early;
    // Connections whose PeerLink names this peer: "has it any connection left" (peer_gone,
    // a closing connection's successor) is then a load, not a walk over every connection,
    // which a server of thousands of clients would pay on every close.
    std::size_t links = 0;
    // A same-node server reached by a tcp lookup (methods/kit/same_node.hpp): the ticket its
    // hellos show, and how to ask for a new one. `route_used`: a connection showed the ticket
    // already, so the next asks first (the server may have restarted and forgotten it).
    std::shared_ptr<kit::SameNodeRoute> route;
    bool route_used = false;
};

// The address a peer answers to: its listen name, or the "pid-N" form of a nameless one.
inline std::string peer_address(const ShmPeer& peer) {
    return peer.name.empty() ? "shm://pid-" + std::to_string(peer.pid) : "shm://" + peer.name;
}

// A connection's reference to its peer, counted in ShmPeer::links for as long as the link
// lives, however the connection ends (closed, or dropped half-built).
class PeerLink {
public:
    PeerLink() = default;
    PeerLink(const PeerLink&) = delete;
    PeerLink& operator=(const PeerLink&) = delete;
    ~PeerLink() { reset(); }

    PeerLink& operator=(std::shared_ptr<ShmPeer> peer) {
        if (peer) ++peer->links;
        reset();
        peer_ = std::move(peer);
        return *this;
    }
    void reset() { release(); }
    // Ends the link and hands over the reference it held.
    std::shared_ptr<ShmPeer> release() {
        if (peer_) --peer_->links;
        return std::move(peer_);
    }
    ShmPeer* get() const { return peer_.get(); }
    ShmPeer* operator->() const { return peer_.get(); }
    ShmPeer& operator*() const { return *peer_; }
    explicit operator bool() const { return peer_ != nullptr; }
    const std::shared_ptr<ShmPeer>& shared() const { return peer_; }

private:
    std::shared_ptr<ShmPeer> peer_;
};

}  // namespace bmi::method::shm
