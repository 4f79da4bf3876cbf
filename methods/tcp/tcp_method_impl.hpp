// SPDX-License-Identifier: LGPL-2.1-or-later
// TcpMethod, the tcp implementation of Method. Its members are spread over files by concern:
// tcp_method.cpp (API entry points), tcp_connection.cpp (socket lifecycle), tcp_send.cpp
// (output framing), tcp_recv.cpp (input parsing and matching), tcp_progress.cpp (event loop).
//
// Ownership: connections_ owns every open Connection; a closed one moves to graveyard_ until
// no stack frame can still refer to it. A Connection holds its peer by shared_ptr, a peer its
// connections by raw pointer. Every pending Operation says in its method_state which queue
// holds it (Place + 1; 0: not pending here); finish() clears it, so an op can never complete
// twice. The op carries it rather than a map keyed by the op: no node allocated and no hash
// taken per message.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "methods/completion_router.hpp"
#include "methods/kit/acceptor.hpp"
#include "methods/method.hpp"
#include "methods/peer_registry.hpp"
#include "methods/tcp/tcp_connection.hpp"
#include "methods/tcp/tcp_limits.hpp"
#include "methods/tcp/tcp_listeners.hpp"
#include "methods/tcp/tcp_peer.hpp"
#include "methods/tcp/tcp_socket.hpp"
#include "support/epoll/accept_reserve.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/memory/return_memory.hpp"
#include "support/spin/adaptive_spin.hpp"

namespace bmi::method::tcp {

// What a peer without libbmi's handshake is spoken to in.
struct LegacyFraming {
    bool forced = false;  // tcp_legacy: every connection we open speaks the legacy framing
    // tcp_legacy_framing, by default the dialect's; accepted legacy connections keep the
    // framing they came with.
    Framing framing = Framing::orangefs;
};

// Whom we take connections from and which ports ours leave from.
struct SourceRules {
    // BMI_TRUSTED_CONNECTION: connections from other sources are closed at accept, and ours
    // come from its ports (unless tcp_source_ports says otherwise).
    std::optional<support::keys::TrustedSources> trusted;
    SourcePorts ports;
    // Connections closed at accept for their source: counted, logged once a minute per host.
    support::keys::RefusalLog refused;
};

// What peers' arrivals hold of us, and the connections paused on it.
struct HeldArrivals {
    EarlyBudget early;   // arrivals of every peer, within Limits
    EarlyBudget grants;  // our GRANTs and the granted arrivals, within Limits::grants
    std::vector<std::uint64_t> paused;  // connections in ReadPhase::wait_early
    // Progress visits only connections with work: these lists name the ones a timer or the
    // unexpected quota may concern, so a server with thousands of idle clients pays nothing
    // for them per call (issue 18). Entries of closed connections are dropped lazily.
    std::vector<std::uint64_t> waiting_unexpected;  // in ReadPhase::wait_unexpected
    bool released = false;  // some budget came back since the last resume_paused()
};

// How progress looks at the sockets before it sleeps, and where it sleeps.
struct Polling {
    Polling(int spin_us, std::chrono::microseconds read_wait_us)
        : spin(spin_us), spin_cap(spin_us), read_wait(read_wait_us) {}
    // Polls the sockets before a sleep while operations wait (BMI_TCP_SPIN_US, 0 = never): a
    // sleeping process wakes long after its data arrived (doc/perf/code-figures.md).
    support::AdaptiveSpin spin;
    std::chrono::microseconds spin_cap;
    // The connection whose data the last poll found, and how many spin or polling passes went
    // since the last epoll_wait (poll_once, progress_polling).
    std::uint64_t hot_connection = 0;
    // The last polling pass read data from the hot connection: if that read also came back
    // short (its reader's `drained`), the next pass skips the read (progress_polling).
    bool hot_read_data = false;
    unsigned polls_since_epoll = 0;
    // BMI_TCP_READ_WAIT_US: the longest sleep in a socket's read (0: none). While
    // wait_in_read is set, the next read_socket blocks (sleep_in_read).
    std::chrono::microseconds read_wait;
    bool wait_in_read = false;
    std::uint64_t detached = 0;  // the connection out of the epoll set (detach), or 0
    std::chrono::steady_clock::time_point sleep_start;
};

class TcpMethod final : public Method, private kit::AcceptorHost {
public:
    TcpMethod(const Config& config, Sink& sink);
    ~TcpMethod() override;
    TcpMethod(const TcpMethod&) = delete;
    TcpMethod& operator=(const TcpMethod&) = delete;

    // Creates the epoll set, the stall timer and the listener; 0 or -BMI_E*.
    int start(const Config& config);

    std::string_view name() const override { return "bmi_tcp"; }
    std::string_view scheme() const override { return "tcp"; }
    int lookup(std::string_view address, std::shared_ptr<Peer>& out) override;
    int lookup_prepared(std::string_view address, const LookupHint& hint,
                        std::shared_ptr<Peer>& out) override;
    int post(Operation& op) override;
    int send_now(Peer& peer, OpKind kind, bmi_msg_tag_t tag,
                 std::span<const Segment> segments) override;
    void progress() override;
    int wait_fd() const override { return epoll_fd_; }
    bool accept_wake_fd(int fd, std::uint64_t tag) override;
    void progress_events(std::span<const epoll_event> ready) override;
    void progress_without_events() override;
    void progress_polling() override;
    bool before_sleep() override;
    void after_wake() override;
    bool sleep_in_read(std::chrono::steady_clock::time_point now,
                       std::chrono::steady_clock::time_point deadline, bool allowed) override;
    void cancel(Operation& op) override;
    void forget_peer(Peer& peer) override;
    bool peer_gone(const Peer& peer) const override {
        return unreachable(static_cast<const TcpPeer&>(peer));
    }
    std::string describe_peer(const Peer& peer) const override;
    std::string peer_host(const Peer& peer) const override;
    int query_range(const Peer& peer, std::string_view id_string, int netmask) const override;
    bool native_lists() const override { return true; }
    bmi_size_t unexpected_limit() const override { return unexpected_limit_; }
    bmi_size_t max_message_size() const override { return INT64_MAX / 2; }
    std::string listen_address() const override { return listeners_.address(); }
    int set_info(Peer* peer, int option, void* arg) override;
    int get_info(Peer* peer, int option, void* arg) override;

    // Bytes charged to the early-data budget over every peer (see Limits).
    bmi_size_t early_bytes_held() const { return held_.early.total(); }
    // Bytes our GRANTs and the granted messages nobody claimed hold, over every peer.
    bmi_size_t grant_bytes_held() const { return held_.grants.total(); }
    // Handshakes refused for the security key, and how many of them the log left out.
    const support::keys::RefusalLog& refusals() const { return keys_.log(); }
    // Open connections whose framing is not settled: an offer unanswered, or HELLO_ACK or the
    // client's HELLO still to come.
    std::size_t handshakes_open() const;

private:
    enum class Place : std::uint8_t {
        posting = 1,     // inside post(), not queued yet (0 is "not pending here")
        send_queued,     // in a connection's small_queue, nothing written
        send_writing,    // the connection's current OutFrame
        send_await_cts,  // RTS written
        send_data,       // in data_queue, some DATA may be written
        recv_posted,     // in the peer's posted_recvs
        recv_data,       // matched; payload arriving on the connection in its slots
    };

    // What tcp keeps in each pending operation (method_slots).
    struct OpSlots {
        Connection* connection = nullptr;  // the one it is queued, written or arriving on
        std::uint64_t cookie = 0;          // its RTS/CTS transfer
        std::chrono::steady_clock::time_point rts_deadline{};  // an unanswered RTS fails then
    };
    static OpSlots& slots(Operation& op) { return method_slots<OpSlots>(op); }

    // tcp_method.cpp
    int post_send(Operation& op);
    // tcp_send_now.cpp: the op post() was given after send_now_started; 0 if it took it over.
    std::optional<int> adopt_started(Operation& op);
    void finish(Operation& op, int error);
    void place(Operation& op, Place where) {
        if (op.method_state == 0) ++pending_ops_;
        op.method_state = static_cast<std::uint8_t>(where);
    }
    // Returns whether op was pending here; it is not afterwards.
    bool unplace(Operation& op) {
        if (op.method_state == 0) return false;
        op.method_state = 0;
        --pending_ops_;
        return true;
    }
    void fail_posted_recvs(TcpPeer& peer, int error);
    // A peer that reached us first and has no connection left: nothing can reach it again.
    static bool unreachable(const TcpPeer& peer) {
        return peer.target.empty() && peer.connections.empty();
    }
    // A connection whose peer reached us first and that the application cannot name (it sent
    // no unexpected message): a frame held back on it can never be claimed by a receive.
    static bool abandoned(const Connection& c) {
        return c.reader.phase != ReadPhase::wait_unexpected && c.peer && c.peer->target.empty() &&
               c.peer->addr() == 0;
    }

    // tcp_connection.cpp
    Connection* connection_for_send(const std::shared_ptr<TcpPeer>& peer, int& error);
    Connection* open_outbound(const std::shared_ptr<TcpPeer>& peer, int& error);
    Connection& add_connection(int fd, bool outbound, std::uint32_t events);
    // kit::AcceptorHost: what the acceptor asks of tcp's connections.
    std::optional<std::string> source_of(kit::AcceptedSocket& socket) override;
    std::optional<std::uint64_t> start_accepted(const kit::AcceptedSocket& socket) override;
    void close_for_room(std::uint64_t id) override;
    // Accepted connections not through their handshake, and those whose peer the application
    // never saw and that have nothing in flight.
    void offer_for_shedding(kit::SheddingChoice& choice) override;
    void watch_listeners(bool on) override { listeners_.set_interest(on); }
    // True (after a rate-limited warning) if BMI_TRUSTED_CONNECTION refuses this source.
    bool refuse_untrusted(const SocketAddress& from);
    void finish_connect(Connection& c);
    // Makes the peer of an accepted connection. An announced address routes nothing, unless
    // `proven`: the peer proved the key over a transcript that binds that address, so later
    // lookups of it (on the connection's plane, if no other peer has the name) find this peer.
    void bind_peer(Connection& c, const std::string& announced, bool legacy, bool proven = false);
    void adopt_announced_name(TcpPeer& peer, bool proven);
    void connection_broken(Connection& c, int error);
    void fail_connection(Connection& c, int error, bool peer_dead);
    void fall_back_to_legacy(Connection& c);
    // Outbound: HELLO goes first and sends wait for HELLO_ACK (a keyed or standalone-framing
    // client, or a first send that only v2 can carry).
    void start_hello(Connection& c);
    // The acceptor's first frame answered our offer without HELLO_ACK: legacy for good.
    void offer_declined(Connection& c);
    // Accepted: the first frame carries the offer; answer HELLO_ACK and write v2 from now on.
    void accept_offer(Connection& c);
    // Receives over 16 MiB posted for a peer just found legacy fail as post() fails them.
    void refuse_large_recvs(TcpPeer& peer);
    // tcp_key_handshake.cpp: the security-key handshake (doc/security.md)
    Hello hello_to_send(Connection& c);
    bool on_keyed_hello(Connection& c, const Hello& hello);
    bool on_keyed_ack(Connection& c, const Hello& ack);
    void on_hello_proof(Connection& c);
    // tcp_same_node.cpp: a HELLO that asks for a same-node offer gets `ack` with ours, if we
    // make any, and the connection closes: it never carries a message.
    void answer_same_node(Connection& c, Hello ack);
    // The handshake chose a cipher: c's traffic is records from here on. `raw` goes out ahead
    // of the first record (the initiator's HELLO_PROOF).
    void start_records(Connection& c, std::span<const std::uint8_t> raw = {});
    void log_plain(const Connection& c) const;
    // Closes c for the key, failing what was posted toward it with -BMI_EACCES; logs `why`
    // once per remote host and interval. With tell_magic, an acceptor first says why (HELLO_ACK
    // with feature_key_required under that magic) where the kit says the initiator is told.
    void refuse(Connection& c, kit::Refusal why, std::optional<std::uint32_t> tell_magic = {});
    void retire(Connection& c);
    void close_peer(TcpPeer& peer, int error, bool peer_dead);
    void update_interest(Connection& c);
    Connection* find_connection(std::uint64_t id);

    // tcp_send.cpp
    void flush(Connection& c);
    bool next_frame(Connection& c);
    bool frame_for_small(Connection& c, Operation& op);
    // The largest expected message that leaves as one EAGER frame on c: 16 KiB on legacy
    // framing (OrangeFS takes larger ones as REND), the negotiated bound on v2.
    static bmi_size_t eager_bound(const Connection& c) {
        return c.framing == Framing::v2 ? c.eager_limit : eager_limit;
    }
    // The header of a message that leaves in one frame on c: UNEXPECTED, or EAGER for an
    // expected one (frame_for_small turns that into REND or RTS when it is too large).
    static Header message_header(const Connection& c, OpKind kind, bmi_msg_tag_t tag,
                                 bmi_size_t size, std::uint8_t msg_class) {
        Header h;
        h.magic = magic_of(c.framing);
        h.tag = c.offering ? offer_tag(tag) : wire_tag(tag);
        h.size = static_cast<std::uint64_t>(size);
        if (kind == OpKind::send_unexpected) {
            h.mode = Mode::unexpected;
            // An OrangeFS header has no room for it: such a peer knows no classes anyway.
            h.msg_class = msg_class;
        } else {
            h.mode = Mode::eager;
        }
        return h;
    }
    // What OrangeFS framing cannot carry whole: over 16 MiB, or an unexpected message's class.
    static bool needs_v2(const Operation& op) {
        return op.kind == OpKind::send ? op.total_size > legacy_message_limit : op.msg_class != 0;
    }
    // Whether an unexpected message of `size` may go on c: within the limit the peer stated,
    // too large for it, or (an offer not answered yet, above the limit every peer that states
    // none has) waiting for the answer that tells.
    enum class UnexpectedFit : std::uint8_t { goes, waits, too_large };
    static UnexpectedFit unexpected_fit(const Connection& c, bmi_size_t size);
    // Our HELLO and HELLO_ACK features, with our unexpected limit stated.
    std::uint64_t hello_features() const {
        return stating_unexpected_limit(our_features, unexpected_limit_);
    }
    void frame_written(Connection& c, OutFrame f);
    // Completes the frames in c.writer.sealed once their records have all left.
    void release_sealed(Connection& c);
    // send_vector, or through c's record layer when it has one.
    ssize_t write_vector(Connection& c, const iovec* iov, int n);
    // A v2 control frame (CTS, NAK, GRANT) on c's control queue; size is a GRANT's room.
    void queue_control(Connection& c, Mode mode, bmi_msg_tag_t tag, std::uint64_t cookie,
                       bmi_size_t size = 0);

    // tcp_recv.cpp
    int post_recv(Operation& op);
    void match_arrival(Operation& op, Arrival& arrival);
    void on_readable(Connection& c);
    bool read_step(Connection& c);
    // One read from the socket for iov (n pieces; iov has room for one more); the bytes it
    // moved into iov, or -1 if none (socket empty, or the connection broke).
    ssize_t read_socket(Connection& c, iovec* iov, int n);
    ssize_t read_records(Connection& c, iovec* iov, int n, std::size_t want, std::size_t ahead,
                         bool direct, const iovec& ahead_iov, bool wait);
    void on_header(Connection& c);
    void dispatch_frame(Connection& c);
    void protocol_error(Connection& c, const char* what);
    void on_scratch_body(Connection& c);
    void on_hello(Connection& c, bool ack);
    void on_eager(Connection& c, bmi_msg_tag_t tag, const std::uint8_t* data, bmi_size_t size);
    void on_rts(Connection& c);
    void on_cts(Connection& c);
    void on_data(Connection& c);
    void on_legacy_rend(Connection& c);
    // Reads a payload of `size` behind the current header straight into op (EAGER with a
    // posted receive, legacy REND); a receive too small fails with -BMI_EMSGSIZE and the
    // payload is discarded.
    void read_body_into(Connection& c, Operation& op, bmi_size_t size);
    void accept_rts(Connection& c, Operation& op, std::uint64_t cookie, bmi_size_t size);
    void body_op_done(Connection& c);
    // Hands the unexpected message in scratch to the Sink; false (and reading paused) while
    // the quota has no room for it.
    bool deliver_unexpected(Connection& c);
    Operation* take_posted_recv(TcpPeer& peer, bmi_msg_tag_t tag);

    // tcp_grants.cpp: room reserved for a peer's large messages
    // Sends a GRANT for a receive of `size` just posted, if the connection and budget allow.
    void maybe_grant(TcpPeer& peer, bmi_size_t size);
    void on_grant(Connection& c);
    // The first grant the peer gave c that covers a message of `size`, removed.
    std::optional<Grant> take_grant(Connection& c, bmi_size_t size);
    // Puts c's unsent GRANTs on its control queue, to leave with the write under way.
    void queue_grants(Connection& c);
    // The EAGER header just read names one of our grants: it becomes the frame's
    // (FrameReader::frame_grant); false after a protocol error if it names none that fits.
    bool claim_grant(Connection& c);
    // The granted frame's body landed in a receive: its reservation comes back.
    void settle_grant(Connection& c);
    // Everything c's grants reserve comes back (the connection closes).
    void release_grants(Connection& c);

    // tcp_early.cpp: the early-data budget
    // Reserves what c's new header commits us to (FrameReader::early_reserved); false, and c
    // paused, if the budget has no room for it.
    bool admit_early(Connection& c);
    // Keeps an arrival of c's current frame; it takes over the frame's reservation.
    void keep_arrival(Connection& c, Arrival arrival);
    // Gives back what c's current frame reserved and no arrival took (it went to a receive,
    // or the connection closes).
    void release_reservation(Connection& c);
    void uncharge(TcpPeer& peer, const Arrival& arrival);
    void drop_arrivals(TcpPeer& peer);
    void resume_paused();

    // tcp_progress.cpp
    void handle_event(std::uint64_t id, std::uint32_t events);
    bool poll_once();
    // One spin poll of the connection that last brought data, by a read instead of an
    // epoll_wait (see poll_once); true if it brought something.
    bool poll_hot_connection();
    // The connection that last brought data, if it can still be read; forgets it otherwise.
    Connection* readable_hot_connection();
    // One read pass over c with the bookkeeping of a progress pass; true if it brought
    // something or closed c.
    bool poll_connection(Connection& c);
    // tcp_read_wait.cpp: the connection sleep_in_read may sleep on, or nullptr.
    Connection* sole_waiting_connection();
    // Takes c out of the epoll set: the kernel then wakes only our read when data comes,
    // without queueing an epoll event nobody waits for. False if epoll refused.
    bool detach(Connection& c);
    // Puts the detached connection c back into the epoll set with its interest; a connection
    // epoll no longer takes is failed.
    void reattach(Connection& c);
    // The detached connection, if any, read as a progress pass would; true if it moved.
    bool read_detached();
    // Reattaches the detached connection, if any: the process is about to sleep in epoll.
    void reattach_detached();
    // Offers the connections parked on the unexpected quota to it again; true if any message
    // got in.
    bool retry_unexpected();
    // Starts the stall or send clock of c when the peer comes to owe us bytes or to hold up
    // ours. Called after every read pass and write: it reads the clock only to start one.
    void watch_deadlines(Connection& c);
    // One of our deadlines came (kit::Deadlines): fails what waited past it.
    void on_deadline(kit::DeadlineKey key, std::chrono::steady_clock::time_point now);
    void fail_late_handshake(Connection& c);
    void fail_unanswered_rts(Connection& c, std::chrono::steady_clock::time_point now);
    // The peer owes us bytes from now on although we read none: a CTS just went out, or
    // reading resumes after a pause. Without this the clock would run from the last read,
    // which may be older than the stall timeout, and a healthy transfer would be cut at once.
    static void restart_stall_clock(Connection& c) {
        c.reader.stall_clock.restart(c.reader.reads_with_data);
    }

    // The listen address this side announces on connection c (its plane's, when allocated).
    const std::string& own_address(const Connection& c) const {
        return listeners_.own_address(c.plane);
    }

    static constexpr std::uint64_t timer_id = 2;

    Sink& sink_;
    int epoll_fd_ = -1;
    kit::Deadlines timers_;  // setup, stall, send and rendezvous deadlines; epoll id timer_id
    TcpListeners listeners_;
    // Accepting, per-source admission and shedding (the kit's); after timers_, which it uses.
    kit::Acceptor acceptor_{*this, timers_, support::LogArea::tcp, "tcp"};
    bmi_size_t unexpected_limit_;
    LegacyFraming legacy_;
    // Keyless: every peer admitted as in OrangeFS. Declared before connections_, whose
    // handshakes hold nonces in it.
    kit::KeyGate keys_{"tcp"};
    SourceRules sources_;
    std::shared_ptr<kit::SameNodeTickets> same_node_;  // a server's offers; null: none
    Limits limits_;
    HeldArrivals held_;
    support::MemoryReturner returner_;  // counts what closed connections and dropped data free
    // Counts progress calls; a connection's direct_write_epoch compares with it (post_send).
    std::uint64_t progress_epoch_ = 1;
    // The send send_now started (Method::send_now_started), until the post() that follows
    // adopts it: its connection's last OutFrame marked `started`.
    struct StartedSend {
        std::uint64_t connection = 0;
        OpKind kind = OpKind::send;
        bmi_msg_tag_t tag = 0;
        bmi_size_t size = 0;
    };
    std::optional<StartedSend> started_send_;
    Polling polling_;
    // Counts one more poll; true on every fourth, which looks at the whole epoll set.
    bool look_due() { return ++polling_.polls_since_epoll % 4 == 0; }
    SocketTuning socket_tuning_;
    std::uint64_t next_connection_id_ = 16;
    std::uint64_t next_cookie_ = 1;
    std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> connections_;
    std::vector<std::unique_ptr<Connection>> graveyard_;
    PeerRegistry<TcpPeer> peers_;
    std::size_t pending_ops_ = 0;  // operations with a method_state (place())
    // post() reports an op finished during the call by its return value, not through the Sink.
    CompletionRouter completions_{sink_};  // finish() -> post()'s result or the Sink
    Operation* cancel_op_ = nullptr;       // completes with -BMI_ECANCEL when its connection dies
};

}  // namespace bmi::method::tcp
