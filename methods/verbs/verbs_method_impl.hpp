// SPDX-License-Identifier: LGPL-2.1-or-later
// VerbsMethod, the verbs implementation of Method. Its members are spread over files by
// concern: verbs_method.cpp (API entry points), verbs_bootstrap.cpp (TCP bootstrap and queue
// pair states), verbs_send.cpp (what goes on the send queue), verbs_recv.cpp (what the SRQ and
// RDMA READs bring), verbs_progress.cpp (events, completion queue, failures), verbs_async.cpp
// (the device's asynchronous events).
//
// Objects of their own: VerbsOpBook (verbs_op_book.hpp) where each pending operation sits and
// how it completes; VerbsQueuePairs (verbs_queue_pairs.hpp) each queue pair's connection;
// VerbsEarlyArrivals (verbs_early_arrivals.hpp) messages kept for receives not yet posted.
//
// Ownership: connections_ owns every Connection until its queue pair has flushed; sends_ and
// reads_ own the rendezvous transfers. Every pending Operation says in its method_state where
// it is (Place); ops_.finish() clears it, so an op can never complete twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "methods/kit/acceptor.hpp"
#include "methods/kit/deadlines.hpp"
#include "methods/method.hpp"
#include "methods/peer_registry.hpp"
#include "methods/verbs/verbs_connection.hpp"
#include "methods/verbs/verbs_device.hpp"
#include "methods/verbs/verbs_early_arrivals.hpp"
#include "methods/verbs/verbs_memory.hpp"
#include "methods/verbs/verbs_method.hpp"
#include "methods/verbs/verbs_op_book.hpp"
#include "methods/verbs/verbs_queue_pairs.hpp"
#include "support/keys/key_proof.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"

namespace bmi::method::verbs {

// The bootstrap listener: its socket, whether our epoll set watches it, its address.
struct VerbsListener {
    int fd = -1;
    bool watched = true;
    std::string address;
};

// The deadlines' lengths, from the settings.
struct VerbsTimeouts {
    std::chrono::milliseconds setup{};       // verbs_setup_timeout_ms
    std::chrono::milliseconds send{};        // verbs_send_timeout_ms (verbs_deadlines.cpp)
    std::chrono::milliseconds rendezvous{};  // verbs_rendezvous_timeout_ms
    // verbs_silent_peer_timeout_ms: the kernel's bound on every bootstrap socket. The device
    // acknowledges for a live process, so only a node that is gone meets it.
    std::chrono::milliseconds silent_peer{};
};

// A plane's QoS on our queue pairs; 0 without an allocated plane.
struct PlaneQos {
    int service_level = 0;
    int traffic_class = 0;
};

// Sealed data our peers may READ (verbs_staging_*_bytes), and who waits for room in it.
struct StagingRoom {
    support::Budget budget;
    std::vector<std::uint64_t> waiters;  // connections whose sends wait for staging
};

// Connections with something left to do at the end of a progress pass, by what it is.
struct ConnectionWork {
    std::vector<std::uint64_t> to_pump;      // connections with new room to send
    std::vector<std::uint64_t> starved;      // connections waiting for a send buffer
    std::vector<std::uint64_t> with_parked;  // connections holding parked SRQ buffers
    std::vector<std::uint64_t> retired;      // ids of connections to destroy at a safe point
};

class VerbsMethod final : public Method, private kit::AcceptorHost {
public:
    VerbsMethod(const Config& config, Sink& sink);
    ~VerbsMethod() override;
    VerbsMethod(const VerbsMethod&) = delete;
    VerbsMethod& operator=(const VerbsMethod&) = delete;

    int start(const Config& config);

    std::string_view name() const override { return "bmi_verbs"; }
    std::string_view scheme() const override { return "verbs"; }
    int lookup(std::string_view address, std::shared_ptr<Peer>& out) override;
    int lookup_prepared(std::string_view address, const LookupHint& hint,
                        std::shared_ptr<Peer>& out) override;
    int post(Operation& op) override;
    void progress() override;
    int wait_fd() const override { return epoll_fd_; }
    bool accept_wake_fd(int fd, std::uint64_t tag) override;
    void progress_events(std::span<const epoll_event> ready) override;
    bool before_sleep() override;
    void cancel(Operation& op) override;
    void forget_peer(Peer& peer) override;
    // A peer that connected to us (we have no bootstrap address for it) with no live
    // connection left.
    bool peer_gone(const Peer& peer) const override;
    std::string describe_peer(const Peer& peer) const override;
    std::string peer_host(const Peer& peer) const override;
    int query_range(const Peer& peer, std::string_view id_string, int netmask) const override;
    bool native_lists() const override { return true; }
    bmi_size_t unexpected_limit() const override { return unexpected_limit_; }
    bmi_size_t max_message_size() const override { return INT64_MAX / 2; }
    std::string listen_address() const override { return listener_.address; }
    int set_info(Peer* peer, int option, void* arg) override;
    int get_info(Peer* peer, int option, void* arg) override;
    void* mem_alloc(bmi_size_t size) override;
    bool mem_free(void* buffer) override;

private:
    // verbs_method.cpp
    void drain_sends();

    // verbs_bootstrap.cpp
    int open_listener(const std::string& host, std::uint16_t port);
    Connection* connection_for(const std::shared_ptr<VerbsPeer>& peer, int& error);
    Connection& add_connection(int fd, bool outbound);
    int create_qp(Connection& c);
    int connect_qp(Connection& c, const Hello& remote);
    void fill_hello(const Connection& c, Hello& hello) const;
    void set_listener_interest(bool on);
    void on_socket(Connection& c, std::uint32_t events);
    void on_hello(Connection& c, const Hello& remote);
    // kit::AcceptorHost: an accepted bootstrap socket is a connection of its own peer.
    std::optional<std::string> source_of(kit::AcceptedSocket& socket) override;
    std::optional<std::uint64_t> start_accepted(const kit::AcceptedSocket& socket) override;
    void close_for_room(std::uint64_t id) override;
    // Inbound handshakes under way, and ready inbound connections whose peer the application
    // never saw and that carry nothing.
    void offer_for_shedding(kit::SheddingChoice& choice) override;
    void watch_listeners(bool on) override { set_listener_interest(on); }
    void became_ready(Connection& c);
    // An accepted connection's peer takes the address it announced once it proved the key
    // (PeerNames::may_take), as on every method.
    void adopt_announced_name(Connection& c);
    bool flush_out(Connection& c);
    void update_interest(Connection& c);

    // verbs_key_handshake.cpp: the security-key handshake (doc/security.md)
    void offer_key(Connection& c, Hello& hello);
    // Tells an initiator it is refused (a HELLO with feature_key_required and no proof).
    void send_refusal(Connection& c);
    // Server: whether a client's HELLO may go on (else it is refused, and told where the kit
    // says so).
    bool check_keyed_hello(Connection& c, const Hello& remote);
    void answer_keyed_hello(Connection& c, const Hello& remote);
    // Client: whether the server's HELLO admits us (keyed: its proof checks), with our proof
    // to send once our queue pair is connected (zero without a key); nullopt once refused.
    std::optional<kit::Proof> check_answer(Connection& c, const Hello& remote);
    void send_client_proof(Connection& c, const kit::Proof& proof);
    void on_client_proof(Connection& c);
    void on_go(Connection& c);
    // Closes c for the key, failing what was posted toward it with -BMI_EACCES; logs `why`
    // once per remote host a minute, never the key. `answering` a hello, first tells the
    // initiator where the kit says so.
    void refuse(Connection& c, kit::Refusal why, bool answering = false);
    // The handshake is proven: with a cipher chosen, c's SENDs are records from now on.
    void start_records(Connection& c);

    // verbs_send.cpp
    int post_send(Operation& op);
    void schedule(Connection& c);
    void pump(Connection& c);
    bool send_control(Connection& c, const Control& control);
    bool send_op(Connection& c, Operation& op);
    bool send_eager(Connection& c, Operation& op, std::uint32_t buffer);
    bool send_rts(Connection& c, Operation& op, std::uint32_t buffer);
    bool post_buffer(Connection& c, std::uint32_t buffer, std::uint32_t length);
    void fill_header(Connection& c, MsgHeader& h, MsgType type);
    bool post_reads(Connection& c, RecvTransfer& t);
    // With encryption: whether op may take staging now (else it waits for a FIN to free some).
    bool staging_allows(Connection& c, const Operation& op);
    // Staging was freed: the connections waiting for it try again.
    void wake_staging_waiters();
    void queue_control(Connection& c, MsgType type, std::uint64_t cookie, FinStatus status);

    // verbs_recv.cpp
    int post_recv(Operation& op);
    bool on_message(Connection& c, std::uint32_t buffer, std::uint32_t length);
    // Takes the credits a message returns, once (they are zeroed in its buffer), parked or
    // not: our sends never wait behind what we hold back. False if that failed the connection.
    bool take_credits(Connection& c, std::uint32_t buffer, std::uint32_t length);
    bool costs_credit(std::uint32_t buffer) const;
    bool on_data_message(Connection& c, const MsgHeader& h, const std::uint8_t* body,
                         std::uint32_t length);
    void on_fin(Connection& c, const MsgHeader& h);
    void on_cancel(Connection& c, const MsgHeader& h);
    void match_arrival(Operation& op, Connection* c, Arrival& arrival);
    void start_read(Operation& op, Connection& c, std::uint64_t cookie, bmi_size_t size,
                    std::vector<RemoteSegment> segments);
    void read_done(RecvTransfer& t);
    // With encryption: opens t's sealed data into its op; false if it fails to open.
    bool open_sealed(RecvTransfer& t);
    // True if it took at least one parked message.
    bool retry_parked();

    // verbs_progress.cpp
    // Everything progress() does after its epoll_wait, for the events given.
    void handle_events(std::span<const epoll_event> ready);
    // Pumps the connections that got room and destroys the retired ones.
    void finish_pass();
    // Schedules c's handshake deadline.
    void watch_setup(const Connection& c);
    // A handshake deadline came (kit::Deadlines): fails the connection if it is not ready.
    void on_setup_deadline(kit::DeadlineKey key);

    // verbs_deadlines.cpp: no wait on a live peer outlives its deadline
    // After a pump: starts the send deadline if messages wait for credits.
    void watch_credits(Connection& c);
    // The RTS of t is out: its rendezvous deadline runs.
    void watch_rts(Connection& c, SendTransfer& t);
    // A send or rendezvous deadline of a ready connection came.
    void on_peer_deadline(kit::DeadlineKey key, std::chrono::steady_clock::time_point now);
    void poll_cq();
    void on_completion(const ibv_wc& wc);
    void fail_connection(Connection& c, int error);
    void maybe_retire(Connection& c);
    void reap();
    void release_send_buffer(std::uint32_t index);

    // verbs_async.cpp
    void drain_async_events();
    // Acts on one event; tests reach it through async_event_option (set_info).
    void on_async_event(const ibv_async_event& event);
    void fail_all_connections(int error);

    static constexpr std::uint64_t listener_id = 1;
    static constexpr std::uint64_t cq_id = 2;
    static constexpr std::uint64_t timer_id = 3;
    static constexpr std::uint64_t async_id = 4;
    // The control layer's tags in our epoll set start at support::wake_tag_floor; ours never do.
    static constexpr std::uint64_t kind_shift = 56;
    static constexpr std::uint64_t kind_send = 1;
    static constexpr std::uint64_t kind_read = 2;
    static constexpr int sq_depth = Device::sq_depth;

    Sink& sink_;
    VerbsOpBook ops_{sink_};  // every completion: post()'s result or the Sink
    Stats stats_;             // reg_*, srq_buffers and connections are filled in by get_info
    std::unique_ptr<Device> device_;
    std::unique_ptr<RegCache> reg_;
    DeviceChoice choice_;
    int epoll_fd_ = -1;
    VerbsListener listener_;
    kit::Deadlines timers_;  // setup, send and rendezvous deadlines by connection id; timer_id
    // Accepting, per-source admission and shedding (the kit's); after timers_, which it uses.
    kit::Acceptor acceptor_{*this, timers_, support::LogArea::verbs, "verbs"};
    int device_failed_ = 0;  // -BMI_E* once the device reported a fatal error
    VerbsTimeouts timeouts_;
    PlaneQos qos_;  // the allocated plane's QoS (doc/planes.md) on every queue pair
    // Keyless: every peer admitted as before. Declared before connections_, whose handshakes
    // hold nonces in it.
    kit::KeyGate keys_{"verbs"};
    StagingRoom staging_;
    bmi_size_t unexpected_limit_;
    VerbsEarlyArrivals arrivals_;  // arrivals of every peer, within verbs_early_*_bytes
    bool print_stats_;             // BMI_VERBS_STATS: counters to stderr when finalized
    std::uint64_t next_connection_id_ = 16;
    std::uint64_t next_cookie_ = 1;
    std::uint64_t next_read_id_ = 1;
    std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> connections_;
    VerbsQueuePairs queue_pairs_;  // each QP's connection, for completions and events
    PeerRegistry<VerbsPeer> peers_;
    std::unordered_map<std::uint64_t, std::unique_ptr<SendTransfer>> sends_;  // by cookie
    std::unordered_map<std::uint64_t, std::unique_ptr<RecvTransfer>> reads_;  // by read id
    ConnectionWork work_;
};

}  // namespace bmi::method::verbs
