// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm Method: one instance's connections, peers and pending operations.
//
// Member functions are spread over files by concern: shm_method.cpp (the Method interface:
// posting, cancel, addresses), shm_progress.cpp (sockets, connection life cycle, waiting and
// waking), shm_protocol.cpp (ring messages: placing, receiving, matching);
// shm_connect_retry.cpp starts an initiator's connect, again while the listener's backlog is
// full; shm_setup_deadline.cpp bounds every connection's handshake in time;
// shm_descriptors.cpp runs out of descriptors.
// Objects of their own: ShmHellos (shm_hellos.hpp) what the sides say before the rings carry
// messages, the key handshake included; ShmOpBook (shm_op_book.hpp) the operations held and
// where each sits;
// ShmVisits (shm_visits.hpp) which connections a poll pass visits, and our doorbell;
// ShmSharedBuffers (shm_shared_buffers.hpp) the buffers both processes map; ShmLargeCopies
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

#include "methods/kit/acceptor.hpp"
#include "methods/kit/deadlines.hpp"
#include "methods/method.hpp"
#include "methods/peer_registry.hpp"
#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_hellos.hpp"
#include "methods/shm/shm_large_copies.hpp"
#include "methods/shm/shm_nameless_peers.hpp"
#include "methods/shm/shm_op_book.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_path_choice.hpp"
#include "methods/shm/shm_peer.hpp"
#include "methods/shm/shm_shared_buffers.hpp"
#include "methods/shm/shm_visits.hpp"
#include "support/epoll/accept_reserve.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"
#include "support/spin/adaptive_spin.hpp"

namespace bmi::method::shm {

class ShmMethod final : public Method, private kit::AcceptorHost {
public:
    ShmMethod(Sink& sink, const Options& options);
    ~ShmMethod() override;
    ShmMethod(const ShmMethod&) = delete;
    ShmMethod& operator=(const ShmMethod&) = delete;

    // Creates the kernel objects and, for a non-empty name, the listener; 0 or -BMI_E*.
    int start(const std::string& listen_name);

    std::string_view name() const override { return "bmi_shm"; }
    std::string_view scheme() const override { return "shm"; }
    int lookup(std::string_view address, std::shared_ptr<Peer>& out) override;
    int send_now(Peer& peer, OpKind kind, bmi_msg_tag_t tag,
                 std::span<const Segment> segments) override;
    int post(Operation& op) override;
    void progress() override;
    bool accept_wake_fd(int fd, std::uint64_t tag) override;
    void progress_events(std::span<const epoll_event> ready) override;
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
    int set_info(Peer*, int, void*) override { return -BMI_ENOSYS; }
    int get_info(Peer*, int, void*) override { return -BMI_ENOSYS; }

    // Admits only peers that prove this key from now on (before start(); empty: keyless).
    void use_key(support::keys::SharedKey key) { hellos_.use_key(std::move(key)); }

private:
    // too_large: an unexpected message beyond what one record on that connection may carry.
    enum class Placed : std::uint8_t { no_room, completed, announced, too_large };

    // --- shm_progress.cpp ---
    void handle_events();
    void dispatch_events(std::span<const epoll_event> ready);
    // --- accepting, and out of file descriptors (shm_descriptors.cpp) ---
    // kit::AcceptorHost: a process of another user is refused; each process is a source.
    std::optional<std::string> source_of(kit::AcceptedSocket& socket) override;
    std::optional<std::uint64_t> start_accepted(const kit::AcceptedSocket& socket) override;
    void close_for_room(std::uint64_t id) override;
    // Accepted connections before their proof, and open ones whose peer the application never
    // saw and that carry nothing.
    void offer_for_shedding(kit::SheddingChoice& choice) override;
    void watch_listeners(bool on) override { set_listener_interest(on); }
    // The client is told why (-BMI_EMFILE), as a hello refused for descriptors is.
    void answer_shed(int fd) override;
    void resume_listener();
    void set_listener_interest(bool on);  // EPOLLIN on the listener, or nothing while paused
    int refuse_for_descriptors(Connection& conn);
    void on_socket_event(Connection& conn, std::uint32_t events);
    int open_connection(const std::shared_ptr<ShmPeer>& peer, Connection*& out);
    // --- shm_connect_retry.cpp: connecting, and again while the listener's backlog is full ---
    // Connects conn (an initiator) to its peer's listener: sends the hello, or waits for the
    // connect to finish, or puts conn in backlog_full. 0 or the error to close it with.
    int start_connect(Connection& conn);
    // The backlog was full: schedules the next try, or -BMI_ETIMEDOUT past the deadline.
    int wait_for_backlog(Connection& conn);
    // A try of a backlog_full connection that is due; 0, or the error to close it with.
    int retry_connect(Connection& conn);
    // --- shm_setup_deadline.cpp: no handshake outlives BMI_SHM_SETUP_TIMEOUT_MS ---
    // Schedules conn's setup deadline (it is in connections_, its setup_deadline set), and its
    // next connect retry while the backlog is full.
    void watch_setup(Connection& conn);
    // The handshake of conn is done: it is open, and its setup deadline is dropped.
    void mark_open(Connection& conn);
    // A deadline of ours came (kit::Deadlines): the sweep, a retry, a setup deadline.
    void on_deadline(kit::DeadlineKey key);
    // Connects again or drops a handshake past its deadline, whichever key is due for.
    void on_setup_step(Connection& conn, kit::DeadlineKind kind);
    // The handshake of conn is past its deadline: one last read of what the peer sent, then 0
    // if that finished it, or the error to close it with.
    int expire_setup(Connection& conn);
    // Reads the next handshake message of a connection not yet open; 0 or the error to close
    // it with.
    int advance_handshake(Connection& conn);
    int ensure_connection(Operation& op, Connection*& out);
    int receive_hello(Connection& conn);
    int receive_reply(Connection& conn);
    // Keyed acceptor: the initiator proved the key; binds its peer and opens the connection.
    int admit_proven(Connection& conn);
    // A departed peer's connection: delivers what its ring still holds (before closing).
    void take_last_messages(Connection& conn);
    void close_connection(Connection& conn, int error);
    Connection* find_connection(std::uint64_t id);
    // The peer of an accepted connection, by the rule of PeerNames::may_take: the instance
    // that said hello (its pid is the kernel's word), named only once it proved the key.
    std::shared_ptr<ShmPeer> peer_for_hello(const Hello& hello, pid_t pid);
    // One pass over the connections the doorbell rang, the busy ones and, when the sweep
    // timer fired, all of them: receive, then send what fits. True if anything moved.
    bool poll_pass();
    // Receives, replies and copies on one connection; 0, or the error to close it with.
    int visit(Connection& conn, bool& moved);
    // The periodic sweep runs while we have connections (it stops with the last).
    void arm_sweep();
    void wake_self();

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
    void take_reply_now(Connection& conn);  // announce: the hello's reply, if it is here
    void write_header(const Window& window, MsgType type, bmi_msg_tag_t tag, std::uint32_t slots,
                      std::int32_t aux, std::uint64_t size, std::uint64_t cookie);

    // --- shm_method.cpp ---
    void detach_in_flight(Connection& conn, Operation& op);

    // --- shm_peer_deadlines.cpp: no wait on a live peer outlives its deadline ---
    // After a visit: starts the send and stall deadlines of the waits that began.
    void watch_peer(Connection& conn);
    // An RTS of op is in the ring: its rendezvous deadline runs.
    void announced(Connection& conn, Operation& op);
    // The receiver answered op's RTS: with HELP (it owes us DONE) or otherwise.
    void answered(Connection& conn, Operation& op, bool helps);
    // A send, stall or rendezvous deadline of conn came.
    void on_peer_deadline(Connection& conn, kit::DeadlineKey key,
                          std::chrono::steady_clock::time_point now);
    // What moves while the peer goes on with the transfers it started (stall deadline).
    std::uint64_t transfer_progress(const Connection& conn) const;

    Sink& sink_;
    ShmOpBook ops_{sink_};
    Options options_;
    int epoll_fd_ = -1;
    int event_fd_ = -1;
    int listen_fd_ = -1;
    // Declared before connections_, whose handshakes hold nonces in its key gate.
    ShmHellos hellos_{options_};
    OutOfDescriptors descriptors_;  // refusals for want of descriptors, warned once a minute
    // Ids 0 to 2 tag the listener, the eventfd and the deadline timer in the epoll set;
    // connections start at 4.
    static constexpr std::uint64_t listener_tag = 0;
    static constexpr std::uint64_t eventfd_tag = 1;
    static constexpr std::uint64_t timer_tag = 2;
    std::uint64_t next_connection_ = 4;
    // Out of file descriptors (shm_descriptors.cpp): one kept in reserve to take a connection
    // we must refuse, the listener unwatched until the next sweep when even that is gone.
    bool listener_paused_ = false;
    std::uint64_t next_cookie_ = 1;
    Connections connections_;
    PeerNames<ShmPeer, std::weak_ptr<ShmPeer>> named_;  // looked up, or proven peers
    NamelessPeers nameless_;
    EarlyBudget early_;           // what every peer's arrivals hold, within Budgets
    support::AdaptiveSpin spin_;  // before_sleep's bounded poll, capped by BMI_SHM_SPIN_US
    std::vector<std::pair<std::uint64_t, int>> pass_failures_;  // scratch of poll_pass
    ShmVisits visits_;  // progress touches only connections with work
    ShmSharedBuffers buffers_{options_, connections_, visits_, descriptors_};
    ShmLargeCopies copies_{options_, ops_, buffers_};
    // Every deadline: the sweep (id 0), which makes the next pass visit every connection,
    // so a bit a hostile peer cleared (or a bug lost) delays a message by at most its period,
    // never loses it; each handshake's setup deadline and connect retry (by connection id).
    // The progress engine sleeps on its timerfd like on any socket, so a deadline passes even
    // when nothing else happens.
    kit::Deadlines timers_;
    // Accepting, per-source admission and shedding (the kit's); after timers_, which it uses.
    kit::Acceptor acceptor_{*this, timers_, support::LogArea::shm, "shm"};
    bool sweep_armed_ = false;
    bool sweep_due_ = false;
};

}  // namespace bmi::method::shm
