// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm Method: one instance's connections, peers and pending operations.
//
// ShmMethod keeps the Method interface, the ring protocol and progress. Its member functions
// are in shm_method.cpp (the Method interface: posting, cancel, addresses), shm_progress.cpp
// (epoll, poll passes, waiting and waking, closing connections) and shm_protocol.cpp (ring
// messages: placing, receiving, matching). Objects of their own, composed here:
// ShmSetup (shm_setup.hpp) everything before a connection is open, its hellos in ShmHellos
// (shm_hellos.hpp); ShmPeerTable (shm_peer_table.hpp) the peers we know and the rule binding a
// connection; ShmOpBook (shm_op_book.hpp) the operations held and where each sits; ShmVisits
// (shm_visits.hpp) which connections a poll pass visits, and our doorbell; ShmSharedBuffers
// (shm_shared_buffers.hpp) the buffers both processes map; ShmLargeCopies
// (shm_large_copies.hpp) a large message's path and the copies across processes.
// As for every method, the control layer serialises all calls (methods/method.hpp), so no
// member takes a lock; the only state shared with another process is in the rings and the
// doorbells.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/method.hpp"
#include "methods/peer_registry.hpp"
#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_large_copies.hpp"
#include "methods/shm/shm_op_book.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_path_choice.hpp"
#include "methods/shm/shm_peer.hpp"
#include "methods/shm/shm_peer_table.hpp"
#include "methods/shm/shm_setup.hpp"
#include "methods/shm/shm_shared_buffers.hpp"
#include "methods/shm/shm_visits.hpp"
#include "support/epoll/accept_reserve.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"
#include "support/spin/adaptive_spin.hpp"

namespace bmi::method::shm {

// before_sleep's bounded polls (support/spin/adaptive_spin.hpp): the short one, and a longer one
// while a large message moves, since its peer copies it then and a sleep here would cost a
// wake-up at the end of every large message (doc/perf/shm-notes.md, "A longer spin while a
// large message moves"). Traffic lengthens both.
struct WaitSpins {
    WaitSpins(int spin_us, int transfer_spin_us)
        : short_wait(spin_us), transfer(transfer_spin_us > 0 ? transfer_spin_us : spin_us) {}
    void reward() {
        short_wait.reward();
        transfer.reward();
    }
    support::AdaptiveSpin short_wait;  // capped by BMI_SHM_SPIN_US
    support::AdaptiveSpin transfer;    // capped by BMI_SHM_TRANSFER_SPIN_US
};

class ShmMethod final : public Method, private ShmSetupHost {
public:
    ShmMethod(Sink& sink, const Options& options);
    ~ShmMethod() override;
    ShmMethod(const ShmMethod&) = delete;
    ShmMethod& operator=(const ShmMethod&) = delete;

    // Creates the kernel objects and, for a non-empty name, the listener; 0 or -BMI_E*.
    // any_port: listen on "NAME:PORT" for a free PORT (listen_on_free_port).
    int start(const std::string& listen_name, bool any_port);

    std::string_view name() const override { return "bmi_shm"; }
    std::string_view scheme() const override { return "shm"; }
    int lookup(std::string_view address, std::shared_ptr<Peer>& out) override;
    // A SameNodeLookup hint: the peer is the same-node server it names, reached with its route.
    int lookup_prepared(std::string_view address, const LookupHint& hint,
                        std::shared_ptr<Peer>& out) override;
    int send_now(Peer& peer, OpKind kind, bmi_msg_tag_t tag,
                 std::span<const Segment> segments) override;
    int post(Operation& op) override;
    void progress() override;
    bool accept_wake_fd(int fd, std::uint64_t tag) override;
    void progress_events(std::span<const epoll_event> ready) override;
    void progress_without_events() override;
    bool before_sleep() override;
    void after_wake() override;
    int wait_fd() const override { return epoll_fd_; }
    void cancel(Operation& op) override;
    void forget_peer(Peer& peer) override;
    // A nameless peer (it has no listen name we could connect to) with no connection left.
    bool peer_gone(const Peer& peer) const override;
    std::string describe_peer(const Peer& peer) const override;
    std::string peer_host(const Peer&) const override { return "localhost"; }
    int query_range(const Peer& peer, std::string_view id_string, int netmask) const override;
    bool native_lists() const override { return true; }
    bmi_size_t unexpected_limit() const override { return options_.unexpected_limit; }
    bmi_size_t max_message_size() const override { return bmi_size_t{1} << 48; }
    std::string listen_address() const override;
    void* mem_alloc(bmi_size_t size) override;
    bool mem_free(void* buffer) override;
    int set_info(Peer* peer, int option, void* arg) override;
    int get_info(Peer*, int option, void* arg) override;
    // Stats to stderr (BMI_SHM_STATS=1), when finalized.
    void print_stats() const;

    // Admits only peers that prove this key from now on (before start(); empty: keyless).
    void use_key(support::keys::SharedKey key) { setup_.hellos().use_key(std::move(key)); }
    // Serves the same-node listener the tickets reserved: only their holders get in, and the
    // tickets learn our nonce. 0 or -BMI_E*.
    int serve_same_node(const std::shared_ptr<kit::SameNodeTickets>& tickets);

private:
    // too_large: an unexpected message beyond what one record on that connection may carry,
    // or beyond the peer's stated limit. held: one above the limit every peer takes, before
    // the reply says the acceptor's (it waits for the reply).
    enum class Placed : std::uint8_t { no_room, completed, announced, too_large, held };
    // How an unexpected message of `size` may go on conn now (the values of Placed above).
    static Placed unexpected_fit(const Connection& conn, bmi_size_t size);

    // --- shm_progress.cpp ---
    void handle_events();
    void dispatch_events(std::span<const epoll_event> ready);
    // A socket event of a connection: an open one's are offers and withdrawals, the others'
    // are setup's.
    void on_socket_event(Connection& conn, std::uint32_t events);
    // A deadline of ours came (kit::Deadlines): the sweep, or setup's.
    void on_deadline(kit::DeadlineKey key);
    // ShmSetupHost, and for the rings: a departed peer's connection delivers what its ring
    // still holds (before closing).
    void take_last_messages(Connection& conn) override;
    void close_connection(Connection& conn, int error) override;
    Connection* find_connection(std::uint64_t id);
    // One pass over the connections the doorbell rang, the busy ones and, when the sweep
    // timer fired, all of them: receive, then send what fits. True if anything moved.
    bool poll_pass();
    // Receives, replies and copies on one connection; 0, or the error to close it with.
    int visit(Connection& conn, bool& moved);
    // The periodic sweep runs while we have connections (it stops with the last).
    void arm_sweep() override;
    void wake_self() override;

    // --- shm_protocol.cpp ---
    int receive_messages(Connection& conn, bool& moved);
    int handle_message(Connection& conn, const MsgHeader& header, const Window& window);
    int handle_reply(Connection& conn, const MsgHeader& header);
    // false: no receive waits and the early budgets are spent; the message stays in the ring.
    bool match_inline(Connection& conn, const MsgHeader& header, const Window& window);
    // Messages kept before their receive (ShmPeer::arrivals), within Budgets: early_fits
    // says whether `bytes` more may be kept, keep_arrival adds one, uncharge takes one
    // off the budgets (and wakes us if a ring waits for room in them).
    bool early_fits(const ShmPeer& peer, std::size_t bytes) const;
    void keep_arrival(ShmPeer& peer, Arrival&& message);
    void uncharge(ShmPeer& peer, const Arrival& message);
    int deliver_unexpected(Connection& conn, const MsgHeader& header, const Window& window);
    // msg_class: written only for kind send_unexpected.
    bool place_inline(Connection& conn, OpKind kind, bmi_msg_tag_t tag, std::uint8_t msg_class,
                      std::span<const Segment> segments, bmi_size_t size);
    Placed place_send(Connection& conn, Operation& op);
    bool place_control(Connection& conn, const Control& control);
    bool stream_data(Connection& conn, bool& moved);
    bool flush(Connection& conn);

    // Tells the peer to look at this connection after a publication into tx: rings only if
    // the peer does not watch the ring (shm_watched.hpp).
    void announce(Connection& conn);
    // Spinning cannot help while the peer we last announced to waits on our own CPU: it runs
    // only once we stop. cpu: ours (-1: unknown).
    bool spin_is_futile(int cpu);
    void take_reply_now(Connection& conn);  // announce: the hello's reply, if it is here
    void write_header(const Window& window, MsgType type, bmi_msg_tag_t tag, std::uint32_t slots,
                      std::int32_t aux, std::uint64_t size, std::uint64_t cookie);

    // --- shm_method.cpp ---
    void detach_in_flight(Connection& conn, Operation& op);

    // --- shm_peer_deadlines.cpp: no wait on a live peer outlives its deadline ---
    // After a visit: starts the send and stall deadlines of the waits that began. Inline:
    // every visit asks, and almost every one finds nothing to start.
    void watch_peer(Connection& conn) {
        if ((conn.send_clock.timed || !conn.waits_for_room()) &&
            (conn.stall_clock.timed || !conn.owes_transfer()))
            return;
        start_peer_clocks(conn);
    }
    void start_peer_clocks(Connection& conn);
    // An RTS of op is in the ring: its rendezvous deadline runs.
    void announced(Connection& conn, Operation& op);
    // The receiver answered op's RTS: with HELP (it owes us DONE) or otherwise.
    void answered(Connection& conn, Operation& op, bool helps);
    // A send, stall or rendezvous deadline of conn came.
    void on_peer_deadline(Connection& conn, kit::DeadlineKey key,
                          std::chrono::steady_clock::time_point now);
    // What moves while the peer goes on with the transfers it started (stall deadline).
    std::uint64_t transfer_progress(const Connection& conn) const;

    // The fields the 8-byte path reads come first, so they share few cache lines.
    Sink& sink_;
    ShmOpBook ops_{sink_};
    int epoll_fd_ = -1;
    int event_fd_ = -1;
    bool sweep_armed_ = false;
    bool sweep_due_ = false;
    std::uint64_t next_cookie_ = 1;
    Connections connections_;
    ShmVisits visits_;  // progress touches only connections with work
    std::vector<std::pair<std::uint64_t, int>> pass_failures_;  // scratch of poll_pass
    EarlyBudget early_;                 // what every peer's arrivals hold, within Budgets
    WaitSpins spins_;                   // before_sleep's bounded polls
    std::uint64_t last_announced_ = 0;  // the connection announce() last told of a message
    std::uint64_t futile_spins_ = 0;    // Stats
    Options options_;
    ShmPeerTable peers_;            // named and nameless peers, and the binding rule
    OutOfDescriptors descriptors_;  // refusals for want of descriptors, warned once a minute
    ShmSharedBuffers buffers_{options_, connections_, visits_, descriptors_};
    ShmLargeCopies copies_{options_, ops_, buffers_};
    // Ids 0 to 2 tag the listener (ShmSetup::listener_tag), the eventfd and the deadline timer
    // in the epoll set; connections start at 4.
    static constexpr std::uint64_t eventfd_tag = 1;
    static constexpr std::uint64_t timer_tag = 2;
    // Every deadline: the sweep (id 0), which makes the next pass visit every connection,
    // so a bit a hostile peer cleared (or a bug lost) delays a message by at most its period,
    // never loses it; each handshake's setup deadline and connect retry (by connection id),
    // and the acceptor's. The progress engine sleeps on its timerfd like on any socket, so a
    // deadline passes even when nothing else happens.
    kit::Deadlines timers_;
    // Connection setup, up to open connections bound to their peers. After timers_, which its
    // acceptor uses; the destructor empties connections_, whose handshakes hold nonces in its
    // key gate, before it goes.
    ShmSetup setup_{options_, *this, connections_, visits_, peers_, timers_, descriptors_};
};

}  // namespace bmi::method::shm
