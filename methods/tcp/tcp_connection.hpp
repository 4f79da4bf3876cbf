// SPDX-License-Identifier: LGPL-2.1-or-later
// The state of one tcp socket: identity, handshake stage, dialect, and its two halves.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/tcp/tcp_frame_reader.hpp"
#include "methods/tcp/tcp_frame_writer.hpp"
#include "methods/tcp/tcp_peer.hpp"
#include "methods/tcp/tcp_records.hpp"
#include "methods/tcp/tcp_wire.hpp"

namespace bmi::method::tcp {

enum class ConnState : std::uint8_t {
    connecting,   // nonblocking connect in flight: only EPOLLOUT is watched
    await_ack,    // HELLO sent; sends wait in small_queue until HELLO_ACK decides the dialect
    await_first,  // accepted; the first frame decides HELLO (v2) or legacy, and the peer
    await_proof,  // accepted a keyed HELLO and answered with our proof: nothing but the
                  // initiator's proof is read, and no peer exists, until it checks
    established,  // frames flow; v2 tells which framing
};

struct Connection {
    std::uint64_t id = 0;  // epoll data; never reused, so stale events find nothing
    int fd = -1;
    bool outbound = false;
    // The handshake must be done by then (Limits::setup_timeout), accepted or outbound.
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
    // that answer, as an unexpected one waits for the hello that states the peer's limit
    // (TcpMethod::unexpected_fit), on the stall clock: an OrangeFS server that has nothing to
    // say never answers.
    bool held_for_answer = false;
    // Accepted: we answered the client's offer with HELLO_ACK and write v2 frames; its
    // OrangeFS frames may still arrive until its HELLO.
    bool await_hello = false;
    std::shared_ptr<TcpPeer> peer;  // null until the first frame of an accepted socket
    SocketAddress remote;
    std::uint32_t events = 0;  // interest currently registered with epoll
    std::size_t plane = 0;     // the allocated plane it runs on (TcpListeners), if any

    // The largest EAGER frame either side sends on it once v2 (v2_eager_limit_for the peer's
    // HELLO or HELLO_ACK features).
    bmi_size_t eager_limit = v2_eager_limit;
    // The peer announced feature_grants: GRANT frames may go to it.
    bool peer_takes_grants = false;
    // The largest UNEXPECTED frame the peer takes, as its HELLO or HELLO_ACK stated it
    // (feature_unexpected_limit); 0 while unknown, and for a peer that states none.
    bmi_size_t peer_unexpected_limit = 0;
    // The features word of the HELLO we sent on it (an initiator's proofs bind it).
    std::uint64_t hello_features_sent = 0;
    // Our GRANTs on it that no EAGER frame has used yet, sent or waiting for the next write;
    // each is charged to the peer's grant account. At most max_grants_per_connection.
    std::vector<Grant> grants_given;
    // GRANTs the peer sent us that none of our sends used yet, in arrival order.
    std::vector<Grant> grants_held;

    // --- security key handshake (doc/security.md); unused without a key ---
    // Until it is established such a connection is on the clock (partial()): one that never
    // finishes its handshake holds a descriptor for the stall timeout at most.
    kit::KeyHandshake key_handshake;

    // Each half keeps its own cursor and queues; TcpMethod drives them.
    FrameReader reader;
    FrameWriter writer;
    // Set once a keyed handshake chose a cipher: every byte after it, both ways, is records.
    std::unique_ptr<RecordLayer> records;

    Dialect dialect() const {
        if (state == ConnState::await_first) return Dialect::first_inbound;
        if (state == ConnState::await_ack) return Dialect::await_ack;
        if (state == ConnState::await_proof) return Dialect::await_proof;
        if (offering) return Dialect::offering;
        if (await_hello) return Dialect::await_hello;
        if (framing == Framing::v2) return Dialect::v2;
        return framing == Framing::standalone ? Dialect::standalone : Dialect::legacy;
    }
    // Accepted and not through its handshake yet: on the setup deadline.
    bool setting_up() const {
        return !outbound && (state == ConnState::await_first || state == ConnState::await_proof);
    }
    // Outbound and not through its handshake: the connect or the acceptor's HELLO_ACK is still
    // to come (the same setup deadline bounds it).
    bool dialling() const {
        return outbound && (state == ConnState::connecting || state == ConnState::await_ack);
    }
    // The peer owes us bytes (mid-frame, or DATA for a transfer we cleared with CTS), so the
    // stall clock runs.
    bool partial() const {
        if (closed || reader.paused()) return false;
        if (setting_up() || held_for_answer) return true;
        if (key_handshake.keyed() && state != ConnState::established &&
            state != ConnState::connecting)
            return true;
        // A record cut short owes bytes as a frame cut short does, even between frames.
        return reader.owes_bytes() || (records && records->owes_input());
    }
    // After a write: output the socket did not take starts the send clock
    // (TcpMethod::watch_deadlines); writes that go through read no clock.
    void note_write_end() {
        writer.note_write_end(closed);
        if (records && records->pending_out() && !closed) writer.write_blocked = true;
    }
    // Input read from the socket but not yet through the framing: no epoll event announces it.
    bool buffered_input() const {
        return reader.has_buffered() || (records && records->has_input());
    }
    // A GRANT waits for the next write (tcp_grants.cpp).
    bool grants_waiting() const {
        for (const Grant& g : grants_given)
            if (!g.sent) return true;
        return false;
    }
    // Output that makes a write of its own; a GRANT waiting in grants_given only rides along.
    bool has_output() const {
        return writer.has_output(state == ConnState::established, held_for_answer) ||
               (records && records->pending_out());
    }
    // Bytes wait for the peer to take some: the socket did not take all we had, or frames are
    // queued for a socket that has not been writable since (a write that filled it exactly
    // leaves nothing taken and not written). The send clock runs meanwhile.
    bool output_waits() const { return writer.write_blocked || has_output(); }
};

}  // namespace bmi::method::tcp
