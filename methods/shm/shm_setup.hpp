// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection setup: accepting (per-source admission and shedding, the kit's), connecting and
// connecting again while the listener's backlog is full, the hello exchange and the deadline
// on it, and running out of file descriptors. A connection leaves it open, bound to a peer.
//
// Its own object because everything a connection meets before its rings carry messages is
// here, and the method's rings and progress never look into it: they ask it for a connection
// to a peer, hand it socket events of connections not yet open, and hear from it (through
// ShmSetupHost) only when a connection must close or its last messages be taken.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "methods/kit/acceptor.hpp"
#include "methods/kit/deadlines.hpp"
#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_hellos.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_out_of_descriptors.hpp"
#include "methods/shm/shm_peer_table.hpp"
#include "methods/shm/shm_shared_buffers.hpp"
#include "methods/shm/shm_visits.hpp"

namespace bmi::method::shm {

// What setup asks of the method that owns the connections.
class ShmSetupHost {
public:
    virtual void close_connection(Connection& conn, int error) = 0;
    // The peer of conn is gone: what its ring still holds is delivered (before closing).
    virtual void take_last_messages(Connection& conn) = 0;
    virtual void wake_self() = 0;
    // A connection was added, or the listener paused or resumed: the sweep may be due.
    virtual void arm_sweep() = 0;

protected:
    ~ShmSetupHost() = default;
};

class ShmSetup final : private kit::AcceptorHost {
public:
    // The tag of the listener in the epoll set (connections' tags are their ids, from 4).
    static constexpr std::uint64_t listener_tag = 0;

    ShmSetup(const Options& options, ShmSetupHost& host, Connections& connections,
             ShmVisits& visits, ShmPeerTable& peers, kit::Deadlines& timers,
             OutOfDescriptors& descriptors);
    ~ShmSetup();
    ShmSetup(const ShmSetup&) = delete;
    ShmSetup& operator=(const ShmSetup&) = delete;

    ShmHellos& hellos() { return hellos_; }
    const ShmHellos& hellos() const { return hellos_; }
    // Connections are watched in epoll_fd; a non-empty name listens there too. 0 or -BMI_E*.
    int start(const std::string& listen_name, bool any_port, int epoll_fd);
    // Listens on listen_name (after start, once): 0 or -BMI_E*.
    int listen(const std::string& listen_name, bool any_port = false);
    // The same with a socket already listening on `name` (ours from now on).
    int adopt_listener(int fd, const std::string& name);
    // Takes the connections waiting on the listener, a few at a time.
    void accept() { acceptor_.accept_all(listen_fd_, 0, 32); }
    bool listener_paused() const { return listener_paused_; }
    // The sweep: a listener paused for want of descriptors listens again.
    void resume_listener();

    // The connection op's sends use, opened (connecting) if there is none; 0 or -BMI_E*.
    int ensure_connection(Operation& op, Connection*& out);
    // The control layer asked route's server again (kit::SameNodeRenewals): the connections
    // waiting for it (ConnState::await_ticket) connect now, with whatever offer it holds.
    void ticket_renewed(const kit::SameNodeRoute& route);
    // A socket event of a connection not yet open.
    void on_socket_event(Connection& conn, std::uint32_t events);
    // Initiator: reads the hello's reply if it is here; 0 or the error to close conn with.
    int receive_reply(Connection& conn);
    // A deadline of the acceptor's or of a connection's setup came.
    void on_deadline(kit::DeadlineKey key);
    // conn is closing: its admission slot goes back.
    void release(std::uint64_t id) { acceptor_.release(id); }

private:
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
    void set_listener_interest(bool on);  // EPOLLIN on the listener, or nothing while paused
    int refuse_for_descriptors(Connection& conn);

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
    // Connects again or drops a handshake past its deadline, whichever key is due for.
    void on_setup_step(Connection& conn, kit::DeadlineKind kind);
    // The handshake of conn is past its deadline: one last read of what the peer sent, then 0
    // if that finished it, or the error to close it with.
    int expire_setup(Connection& conn);
    // --- shm_setup.cpp: the hellos ---
    // Reads the next handshake message of a connection not yet open; 0 or the error to close
    // it with.
    int advance_handshake(Connection& conn);
    int receive_hello(Connection& conn);
    // Keyed acceptor: the initiator proved the key; binds its peer and opens the connection.
    int admit_proven(Connection& conn);
    Connection* find(std::uint64_t id) const;

    const Options& options_;
    ShmSetupHost& host_;
    Connections& connections_;
    ShmVisits& visits_;
    ShmPeerTable& peers_;
    kit::Deadlines& timers_;
    OutOfDescriptors& descriptors_;
    int epoll_fd_ = -1;
    int listen_fd_ = -1;
    // Out of file descriptors (shm_descriptors.cpp): one kept in reserve to take a connection
    // we must refuse, the listener unwatched until the next sweep when even that is gone.
    bool listener_paused_ = false;
    std::uint64_t next_connection_ = 4;
    // Declared before any connection is made: their handshakes hold nonces in its key gate.
    ShmHellos hellos_;
    // Accepting, per-source admission and shedding (the kit's).
    kit::Acceptor acceptor_;
};

}  // namespace bmi::method::shm
