// SPDX-License-Identifier: LGPL-2.1-or-later
// A verbs peer and its connection: one RC queue pair plus the bootstrap TCP socket, which stays
// open for the connection's life so that a dead peer is noticed at once (EOF or RST) rather
// than only after the RC retry timeout of a transfer that happens to be in flight.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "methods/arrivals_by_tag.hpp"
#include "methods/early_budget.hpp"
#include "methods/kit/deadlines.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/method.hpp"
#include "methods/verbs/verbs_memory.hpp"
#include "methods/verbs/verbs_records.hpp"
#include "methods/verbs/verbs_wire.hpp"
#include "support/budget/budget.hpp"
#include "support/keys/key_proof.hpp"
#include "support/op_queue/op_queue.hpp"

namespace bmi::method::verbs {

struct Connection;
using OpList = support::OpQueue<Operation, SafeHook, &Operation::method_hook>;

// An eager message or RTS that arrived before a matching receive was posted.
struct Arrival {
    bool rts = false;
    bmi_msg_tag_t tag = 0;
    bmi_size_t size = 0;
    std::uint64_t cookie = 0;              // rts
    std::uint64_t connection_id = 0;       // rts: the connection to read through
    std::vector<RemoteSegment> segments;   // rts
    std::unique_ptr<std::uint8_t[]> data;  // eager payload, copied out of the SRQ buffer
};

class VerbsPeer final : public Peer {
public:
    std::string canonical;      // "verbs://host:port" to look up, or "" if it does not listen
    std::string host;           // bootstrap host (lookup) or remote IP (accepted)
    std::uint16_t port = 0;     // bootstrap port, 0 if unknown
    sockaddr_storage target{};  // resolved bootstrap address; target_length 0 if unknown
    socklen_t target_length = 0;
    std::string remote_text;           // "ip:port" of the socket, for peers without a name
    Connection* connection = nullptr;  // the one carrying our traffic, nullptr if none
    int last_error = 0;                // why the last connection died
    // Connections naming it that have not failed (attach_peer, mark_failed): peer_gone asks
    // this instead of walking every connection on every failure.
    std::size_t live_connections = 0;
    ArrivalsByTag<Arrival> arrivals;   // messages waiting for a receive, by tag
    EarlyBudget::Account early;        // what arrivals hold against VerbsEarlyArrivals
    support::Budget::Account staging;  // sealed rendezvous data of ours it may READ
};

// Sealed rendezvous data held for a peer's READs, charged to the staging budget while it lives.
class Staging {
public:
    Staging(support::Budget& budget, std::shared_ptr<VerbsPeer> peer, std::uint64_t bytes)
        : budget_(budget),
          peer_(std::move(peer)),
          bytes_(static_cast<std::int64_t>(bytes)),
          data_(new std::uint8_t[bytes]) {
        budget_.charge(peer_->staging, bytes_);
    }
    ~Staging() { budget_.release(peer_->staging, bytes_); }
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    std::uint8_t* data() const { return data_.get(); }
    std::uint64_t size() const { return static_cast<std::uint64_t>(bytes_); }

private:
    support::Budget& budget_;
    std::shared_ptr<VerbsPeer> peer_;
    std::int64_t bytes_;
    std::unique_ptr<std::uint8_t[]> data_;
};

// The address a peer answers to: the one looked up, or its socket's for a nameless one.
inline std::string peer_address(const VerbsPeer& peer) {
    return peer.canonical.empty() ? "verbs://" + peer.remote_text : peer.canonical;
}

// A large send waiting for the receiver's FIN.
struct SendTransfer {
    Operation* op = nullptr;  // nullptr once cancelled: only the registration remains
    Connection* connection = nullptr;
    std::vector<RegCache::Handle> handles;
    std::unique_ptr<std::uint8_t[]> packed;  // send lists longer than an RTS can describe
    std::unique_ptr<Staging> staging;        // with encryption: what the peer READs instead
    std::uint64_t cookie = 0;                // with staging: names the data's key
    // The op fails then unless the FIN came (verbs_deadlines.cpp).
    std::chrono::steady_clock::time_point deadline{};
};

// A large receive reading the sender's memory.
struct RecvTransfer {
    Operation* op = nullptr;
    Connection* connection = nullptr;
    std::uint64_t read_id = 0;
    std::uint64_t cookie = 0;
    std::vector<RemoteSegment> remote;
    std::vector<RegCache::Handle> handles;          // one per local segment (none for empty ones)
    std::size_t remote_index = 0, local_index = 0;  // where the next READ starts
    std::uint64_t remote_offset = 0, local_offset = 0;
    // With encryption: the sealed data is READ here, opened, and only then copied to the op.
    std::unique_ptr<std::uint8_t[]> sealed;
    Segment sealed_segment;
    int outstanding = 0;  // READs posted and not yet completed
    int error = 0;
    bool issued_all = false;
};

// Control messages waiting for a send slot: FIN, CANCEL and CREDIT carry no payload.
struct Control {
    MsgType type;
    std::uint64_t cookie = 0;
    FinStatus status = FinStatus::ok;
};

struct Connection {
    enum class State : std::uint8_t {
        connecting,      // client: TCP connect in progress
        hello_sent,      // client: our HELLO is out, waiting for the server's
        awaiting_hello,  // server: accepted, waiting for the client's HELLO
        awaiting_proof,  // server, keyed: answered with our proof, waiting for the client's;
                         // our QP stays in INIT and no peer exists until it checks
        awaiting_go,     // client, keyed: sent our proof, waiting for the server's ready byte
        awaiting_ready,  // server: answered, waiting for the client's ready byte
        ready,           // both QPs in RTS
        failed,          // QP in error; waiting until its work requests have flushed
    };
    std::uint64_t id = 0;
    State state = State::connecting;
    int fd = -1;
    ibv_qp* qp = nullptr;
    std::uint32_t psn = 0;
    std::shared_ptr<VerbsPeer> peer;
    bool outbound = false;
    bool ready_seen = false;  // server: the client's ready byte has arrived
    std::chrono::steady_clock::time_point setup_deadline;  // handshake must finish by then
    int error = 0;

    // --- security key handshake (doc/security.md); unused without a key ---
    // What each side's HELLO says of it (endpoint_text) is what it states.
    kit::KeyHandshake key_handshake;
    Hello remote_hello;  // server: the client's HELLO, for its QP once the proof checks
    // Set once a keyed handshake chose a cipher: every SEND after it, both ways, is a record.
    std::unique_ptr<VerbsRecords> records;

    // Bootstrap bytes in each direction.
    std::vector<std::uint8_t> in;
    std::vector<std::uint8_t> out;
    std::size_t out_done = 0;

    // Its HELLO's unexpected limit: the largest unexpected message it takes.
    bmi_size_t peer_unexpected_limit = 0;

    // Flow control (see doc/methods/verbs.md, "Credits").
    int send_credits = 0;  // eager messages we may still send
    int send_window = 0;   // credits the peer granted in its HELLO: send_credits never exceeds it
    int granted_credits =
        0;                 // messages the peer may still send us (our window + returns - arrivals)
    int owed_credits = 0;  // buffers of theirs we consumed and have not reported back
    int sq_free = 0;       // free send-queue slots
    int sq_depth = 0;
    bool pump_scheduled = false;
    // Messages wait for credits the peer must return within the send timeout
    // (verbs_deadlines.cpp); credits_back counts every credit it returned.
    kit::ProgressDeadline send_clock;
    std::uint64_t credits_back = 0;
    bool waits_for_credits() const {
        return send_credits == 0 && (!sends.empty() || !controls.empty());
    }

    OpList sends;                     // sends not yet on the wire, in post order
    std::deque<Control> controls;     // control messages not yet on the wire
    std::deque<RecvTransfer*> reads;  // transfers with READs left to post
    // SRQ buffers held back because the unexpected quota was full; later messages of this
    // connection wait behind them so per-tag order holds.
    std::deque<std::pair<std::uint32_t, std::uint32_t>> parked;  // buffer index, length
};

// Names peer as c's peer (once, on a connection not yet failed); c counts among the peer's
// live connections until mark_failed.
inline void attach_peer(Connection& c, std::shared_ptr<VerbsPeer> peer) {
    if (peer && c.state != Connection::State::failed) ++peer->live_connections;
    c.peer = std::move(peer);
}

// The one way a connection's state becomes failed, so the count above stays true.
inline void mark_failed(Connection& c) {
    if (c.state == Connection::State::failed) return;
    c.state = Connection::State::failed;
    if (c.peer) --c.peer->live_connections;
}

}  // namespace bmi::method::verbs
