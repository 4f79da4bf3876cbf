// SPDX-License-Identifier: LGPL-2.1-or-later
// The state of one tcp socket: handshake stage, the frame being read, and the output queues.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/tcp/tcp_peer.hpp"
#include "methods/tcp/tcp_wire.hpp"

namespace bmi::method::tcp {

enum class ConnState : std::uint8_t {
    connecting,  // nonblocking connect in flight: only EPOLLOUT is watched
    await_ack,   // HELLO sent; sends wait in small_queue until HELLO_ACK decides the dialect
    await_first, // accepted; the first frame decides HELLO (v2) or legacy, and the peer
    await_proof, // accepted a keyed HELLO and answered with our proof: nothing but the
                 // initiator's proof is read, and no peer exists, until it checks
    established, // frames flow; v2 tells which framing
};

enum class ReadPhase : std::uint8_t {
    header,             // collecting a header
    body_scratch,       // eager, unexpected or HELLO payload into scratch (each bounded)
    body_op,            // DATA chunk or legacy rendezvous payload straight into read_op
    discard,            // payload nobody can take (receive too small): drop it
    wait_unexpected,    // alloc_unexpected said no: EPOLLIN off, retried every progress()
    wait_match,         // legacy rendezvous without a receive: EPOLLIN off until one is posted
    wait_early,         // header read, but the peer's early-data budget is spent: EPOLLIN off
                        // until a receive claims some of it (TcpMethod::resume_paused)
};

enum class OutKind : std::uint8_t {
    control,     // CTS, NAK, GRANT, HELLO, HELLO_ACK: bytes only
    message,     // eager, unexpected or legacy rendezvous: the op completes when written
    rts,         // the op then waits for CTS or NAK
    data_chunk,  // one DATA chunk of op
};

// Room for one message of up to `size` bytes, named by `cookie` (tcp_grants.cpp).
struct Grant {
    std::uint64_t cookie = 0;  // 0: none
    bmi_size_t size = 0;
    bool sent = false;  // one of ours: written to the peer, so an EAGER frame may name it
};

struct OutFrame {
    OutKind kind = OutKind::control;
    std::array<std::uint8_t, max_header_size> head{};
    std::size_t head_length = 0;
    std::vector<std::uint8_t> body;  // control frames with a body (HELLO)
    Operation* op = nullptr;
    // The peer's GRANT this EAGER frame uses: back to grants_held if the frame is cancelled
    // before a byte of it is written.
    Grant grant;
    bmi_size_t offset = 0;  // payload range inside op
    bmi_size_t length = 0;
    std::size_t done = 0;  // bytes of head + body + payload already written

    std::size_t total() const {
        return head_length + body.size() + static_cast<std::size_t>(length);
    }
};

// Big enough for a header and a typical eager payload in one read; small enough that the
// payload bytes a DATA header drags into it (and that must be copied once more) stay a few
// percent of a chunk.
inline constexpr std::size_t read_ahead_size = 32 * 1024;

struct Connection {
    std::uint64_t id = 0;  // epoll data; never reused, so stale events find nothing
    int fd = -1;
    bool outbound = false;
    // Accepted: the handshake must be done by then (Limits::setup_timeout).
    std::chrono::steady_clock::time_point setup_deadline{};
    // The layout of its frames once established: v2 after libbmi's handshake, else the legacy
    // framing its first frame used (accepted) or the instance chose (outbound).
    Framing framing = Framing::orangefs;
    bool closed = false;
    ConnState state = ConnState::connecting;
    // Outbound, keyless: our OrangeFS frames carry the upgrade offer (offer_tag) until the
    // acceptor's first frame answers it, HELLO_ACK (then v2) or an OrangeFS frame (legacy).
    bool offering = false;
    // A frame with the offer is out (or taken for writing): only the answer decides now.
    bool offer_made = false;
    // A send only v2 carries whole (TcpMethod::needs_v2) waits at the head of small_queue for
    // that answer,
    // on the stall clock: an OrangeFS server that has nothing to say never answers.
    bool held_for_answer = false;
    // Accepted: we answered the client's offer with HELLO_ACK and write v2 frames; its
    // OrangeFS frames may still arrive until its HELLO.
    bool await_hello = false;
    std::shared_ptr<TcpPeer> peer;  // null until the first frame of an accepted socket
    SocketAddress remote;
    std::uint32_t events = 0;  // interest currently registered with epoll
    std::size_t plane = 0;     // the allocated plane it runs on (TcpMethod::planes_), if any

    // The largest EAGER frame either side sends on it once v2 (v2_eager_limit_for the peer's
    // HELLO or HELLO_ACK features).
    bmi_size_t eager_limit = v2_eager_limit;
    // The peer announced feature_grants: GRANT frames may go to it.
    bool peer_takes_grants = false;
    // Our GRANTs on it that no EAGER frame has used yet, sent or waiting for the next write;
    // each is charged to the peer's grant account. At most max_grants_per_connection.
    std::vector<Grant> grants_given;
    // GRANTs the peer sent us that none of our sends used yet, in arrival order.
    std::vector<Grant> grants_held;

    // --- reading ---
    ReadPhase phase = ReadPhase::header;
    std::array<std::uint8_t, max_header_size> head{};
    std::size_t head_have = 0;
    Header header;  // the frame whose body is being read
    // The grant the frame being read came under (0: none). Its reservation stays charged
    // until the body has landed: in a receive, or buffered as an arrival that keeps the charge.
    bmi_size_t frame_grant = 0;
    // What the frame being read holds against its peer's early-data budget since its header
    // was admitted (0: nothing): a body that arrives slowly is paid for before its buffer is
    // sized, not when it is whole. Kept by the arrival it becomes, or given back.
    bmi_size_t early_reserved = 0;
    std::vector<std::uint8_t> scratch;
    std::size_t scratch_have = 0;
    Operation* read_op = nullptr;  // body_op target
    bmi_size_t body_left = 0;      // body_op, discard: bytes of this frame still to read
    // The peer owes us bytes (partial()): it must move some within the stall timeout
    // (TcpMethod::on_deadline), counted by reads_with_data, without a clock reading per read.
    kit::ProgressDeadline stall_clock;
    // Read-ahead for small frames: one recv() usually brings a header with its eager payload
    // (and often the next frame too), instead of one system call per piece. Large payloads
    // (DATA chunks, legacy rendezvous bodies) bypass it and land straight in the receive.
    std::unique_ptr<std::uint8_t[]> inbuf;
    std::size_t in_pos = 0;
    std::size_t in_end = 0;
    bool drained = false;  // the last read came back short: the socket is empty for now
    std::uint64_t reads_with_data = 0;  // read_socket calls that brought bytes
    // How long a read that sleeps on the socket (TcpMethod::sleep_in_read) may take at most:
    // 0 until the first such sleep puts the socket in blocking mode, negative if it could not.
    std::chrono::microseconds read_wait_bound{0};
    // Out of the epoll set while the method sleeps in its read (TcpMethod::detach): every
    // progress pass reads it by hand, and it goes back before any sleep in epoll.
    bool detached = false;
    // The last header announced a payload too large for the read-ahead (or, RTS, a transfer whose
    // DATA brings one): the next header is read alone, because a header read through the read-ahead
    // drags up to 32 KiB of its payload along, and every byte of that must be copied once more
    // (doc/perf/code-figures.md). A payload read straight into its receive takes only the next
    // header along (see TcpMethod::read_socket).
    bool header_alone = false;
    // Receives cleared by our CTS, keyed by the sender's cookie; DATA frames fill them.
    std::unordered_map<std::uint64_t, Operation*> incoming;

    // --- security key handshake (doc/security.md); unused without a key ---
    // Until it is established such a connection is on the clock (partial()): one that never
    // finishes its handshake holds a descriptor for the stall timeout at most.
    kit::KeyHandshake key_handshake;

    // --- writing ---
    // The socket did not take all we had for it: the peer must take some within the send
    // timeout (send_clock, TcpMethod::on_deadline); writes_with_data counts the writes that
    // moved bytes.
    bool write_blocked = false;
    std::uint64_t writes_with_data = 0;
    kit::ProgressDeadline send_clock;
    std::deque<OutFrame> control_queue;
    OpList small_queue;  // sends whose header is not written yet, in post order
    std::unordered_map<std::uint64_t, Operation*> await_cts;  // RTS written, keyed by cookie
    OpList data_queue;  // sends cleared by CTS, served one chunk at a time
    // Frames taken from the queues for writing, in wire order; only the first may be partly
    // written. One sendmsg carries as many of them as fit (tcp_send.cpp, coalescing).
    std::deque<OutFrame> out;
    // The progress epoch (TcpMethod::progress_epoch_) of this connection's last write from
    // inside post(): a second send posted before the next progress call is queued instead, so
    // that a burst of sends leaves in one system call.
    std::uint64_t direct_write_epoch = 0;

    Dialect dialect() const {
        if (state == ConnState::await_first) return Dialect::first_inbound;
        if (state == ConnState::await_ack) return Dialect::await_ack;
        if (state == ConnState::await_proof) return Dialect::await_proof;
        if (offering) return Dialect::offering;
        if (await_hello) return Dialect::await_hello;
        if (framing == Framing::v2) return Dialect::v2;
        return framing == Framing::standalone ? Dialect::standalone : Dialect::legacy;
    }
    // Reading is stopped until something on our side changes (memory, a posted receive).
    bool paused() const {
        return phase == ReadPhase::wait_unexpected || phase == ReadPhase::wait_match ||
               phase == ReadPhase::wait_early;
    }
    // Accepted and not through its handshake yet: on the setup deadline.
    bool setting_up() const {
        return !outbound && (state == ConnState::await_first || state == ConnState::await_proof);
    }
    // The peer owes us bytes (mid-frame, or DATA for a transfer we cleared with CTS), so the
    // stall clock runs.
    bool partial() const {
        if (closed || paused()) return false;
        if (setting_up() || held_for_answer) return true;
        if (key_handshake.keyed() && state != ConnState::established && state != ConnState::connecting)
            return true;
        if (phase == ReadPhase::header) return head_have > 0 || !incoming.empty();
        return true;
    }
    // After a write: output the socket did not take starts the send clock
    // (TcpMethod::watch_deadlines); writes that go through read no clock.
    void note_write_end() { write_blocked = !out.empty() && !closed; }
    // A GRANT waits for the next write (tcp_grants.cpp).
    bool grants_waiting() const {
        for (const Grant& g : grants_given)
            if (!g.sent) return true;
        return false;
    }
    // Output that makes a write of its own; a GRANT waiting in grants_given only rides along.
    bool has_output() const {
        return !out.empty() || !control_queue.empty() ||
               (state == ConnState::established &&
                ((!small_queue.empty() && !held_for_answer) || !data_queue.empty()));
    }
};

}  // namespace bmi::method::tcp
