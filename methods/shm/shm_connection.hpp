// SPDX-License-Identifier: LGPL-2.1-or-later
// One connection between two instances: its socket, segment, rings and in-flight transfers.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/shm/shm_doorbell.hpp"
#include "methods/shm/shm_peer.hpp"
#include "methods/shm/shm_region.hpp"
#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_segment.hpp"
#include "methods/shm/shm_split.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/keys/key_proof.hpp"

namespace bmi::method::shm {

enum class ConnState : std::uint8_t {
    backlog_full,  // initiator: the listener's backlog was full; no socket, connect again at
                   // retry_at (shm_connect_retry.cpp); sends wait in send_queue
    await_ticket,  // initiator: its same-node server is being asked for a new ticket, outside
                   // our lock (kit::SameNodeRenewals); no socket, sends wait in send_queue
    connecting,    // initiator: nonblocking connect not finished; rings usable, hello unsent
    await_reply,   // initiator: hello sent; we may fill our ring but cannot wake the peer yet
    await_hello,   // acceptor: socket accepted, no segment yet; carries no peer and no ops
    await_proof,   // acceptor: keyed reply sent; no peer and no ring read until the proof checks
    open,          // both sides attached
};

// A reply (CTS, DONE, NAK, HELP) waiting for ring space; only HELP has a payload.
struct Control {
    MsgType type;
    std::uint64_t cookie;
    std::uint64_t size;
    std::int32_t aux;
    std::vector<std::byte> payload = {};
};

// A single-copy receive in progress: we read the sender's memory piece by piece.
struct Pull {
    Operation* op;
    std::uint64_t cookie;
    std::vector<RemoteIov> iovs;
    bmi_size_t size;
};

// A two-copy receive: CTS sent, DATA expected.
struct StreamReceive {
    Operation* op;
    std::uint64_t started_ns;  // monotonic time the receiver chose this path; 0: not timed
};

struct Connection {
    std::uint64_t id = 0;
    int fd = -1;
    ConnState state = ConnState::connecting;
    bool initiator = false;
    // The largest unexpected message the peer takes, as its hello or reply stated it; 0 until
    // an initiator has the reply.
    bmi_size_t peer_unexpected_limit = 0;
    SharedSegment segment;
    Ring tx;  // we produce
    Ring rx;  // we consume
    int peer_event_fd = -1;
    pid_t peer_pid = 0;
    PeerLink peer;
    bool stalled = false;      // an unexpected message waits in rx for quota
    PeerRegions peer_regions;  // the peer's shared buffers, mapped here (shm_region.hpp)
    int socket_error = 0;      // the socket's framing broke; poll_pass closes the connection
    // Until open: when the handshake must be done (BMI_SHM_SETUP_TIMEOUT_MS after the first
    // connect or the accept, shm_setup_deadline.cpp). backlog_full: when to connect again and
    // the pause after that.
    std::chrono::steady_clock::time_point setup_deadline{};
    std::chrono::steady_clock::time_point retry_at{};
    std::chrono::milliseconds retry_pause{0};
    // Socket messages (offers, withdrawals) counted in the segment: ours as we send them,
    // the peer's as it does; socket_read counts the peer's we have read.
    std::atomic<std::uint64_t>* own_socket_sent = nullptr;
    const std::atomic<std::uint64_t>* peer_socket_sent = nullptr;
    std::uint64_t socket_read = 0;

    // Doorbells (shm_doorbell.hpp): the index of ours the peer rings for this connection (-1:
    // none), the peer's doorbell and the index we ring there (not mapped until the hello or
    // its reply brought it).
    long bell_index = -1;
    Doorbell peer_bell;
    std::uint32_t peer_bell_index = 0;
    // Progress bookkeeping (shm_progress.cpp): on the method's list of connections with work
    // of their own; the poll pass that last queued it for a visit.
    bool busy = false;
    std::uint64_t pass_mark = 0;
    // In WatchedRings (shm_watched.hpp), and the last poll pass that took messages from rx.
    bool watched = false;
    std::uint64_t last_traffic_pass = 0;

    // Security key handshake (doc/security.md); unused without a key.
    kit::KeyHandshake key_handshake;
    Hello hello_received{};  // acceptor: the keyed hello, acted on once its sender proves

    OpList send_queue;                                          // header not yet in the ring
    std::deque<Control> controls;                               // replies waiting for ring space
    std::deque<Operation*> streams;                             // two-copy sends streaming DATA
    std::unordered_map<std::uint64_t, Operation*> sends;        // RTS sent, not finished
    std::unordered_map<std::uint64_t, StreamReceive> receives;  // by cookie
    std::deque<Pull> pulls;
    std::deque<SplitReceive> splits;  // split copies we receive
    std::deque<SplitPush> pushes;     // split copies we send and still help with

    // Waits on the live peer (shm_peer_deadlines.cpp): room in its ring, and the transfers it
    // started; receipts counts the visits that took messages from rx, helped the sends it
    // answered with HELP and owes the DONE of.
    kit::ProgressDeadline send_clock;
    kit::ProgressDeadline stall_clock;
    std::uint64_t receipts = 0;
    std::uint32_t helped = 0;

    // Split boards (shm_split.hpp): ours hands out the chunks of what we receive, the peer's
    // those of what we send. Entry i of ours is free while bit i of board_free is set.
    SplitBoardEntry* own_board = nullptr;
    SplitBoardEntry* peer_board = nullptr;
    std::uint32_t board_free = (1u << split_board_entries) - 1;
    std::uint32_t board_generation[split_board_entries] = {};

    ~Connection();
    // The rings carry messages: always once open. Before the reply a keyless initiator already
    // fills its ring, as it always did (a single-threaded client's first send completes
    // without the server's help). A keyed one waits until the acceptor has proven the key, so
    // nothing it sends can reach an unproven acceptor.
    bool rings_live() const {
        return state == ConnState::open ||
               (!key_handshake.keyed() &&
                (state == ConnState::connecting || state == ConnState::await_reply));
    }
    // True while something here can move without the peer doing anything first.
    bool has_local_work() const {
        if (!pulls.empty() || !pushes.empty()) return true;
        for (const auto& split : splits)
            if (!split.claims_done) return true;
        return false;
    }
    // A split receive waits only for what the peer wrote, and that is in: advance_splits can
    // finish it (the copying we still do ourselves is has_local_work()).
    bool split_finishable() const;
    // The peer owes us part of a transfer: DATA after our CTS, its share of a split copy, or
    // the DONE of a copy it helps with (the stall deadline runs).
    bool owes_transfer() const { return !receives.empty() || !splits.empty() || helped != 0; }
    // True while something waits to be written into tx (flush() has work).
    bool waits_for_room() const {
        return !controls.empty() || !streams.empty() || !send_queue.empty();
    }
    // The peer last waited on cpu (its doorbell's hint; false before the doorbell is mapped or
    // for cpu < 0). A wrong hint costs speed, never a message.
    bool peer_waits_on(int cpu) const {
        return cpu >= 0 && peer_bell.mapped() && peer_bell.owner_waits_on(cpu);
    }
    // Tells the peer to look at this connection: wake_peer rings its doorbell (and writes its
    // eventfd if it sleeps) after a publication or a split counter the peer watches. Before
    // the hello's reply we know neither: receive_reply rings once the peer attached.
    void wake_peer() {
        if (!peer_bell.mapped()) return;
        if (peer_bell.ring(peer_bell_index)) write_peer_event();
    }
    void write_peer_event() {
        if (peer_event_fd < 0) return;
        std::uint64_t one = 1;
        ssize_t ignored = write(peer_event_fd, &one, sizeof one);
        (void)ignored;
    }
    // True while a poll pass must visit us even though the peer rings nothing: work of our
    // own, a ring left unread for want of budget, a split receive waiting for the sender's
    // share, a broken socket to close, a hello reply to look for.
    bool needs_visit() const {
        return socket_error != 0 || stalled || has_local_work() || waits_for_room() ||
               !splits.empty() || state == ConnState::await_reply;
    }
};

}  // namespace bmi::method::shm
