// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection setup (shm_setup.hpp): listening, accepting and opening connections, and the
// hellos that bind each to its peer. Connect retries, setup deadlines and running out of
// descriptors are in shm_connect_retry.cpp, shm_setup_deadline.cpp and shm_descriptors.cpp.
#include "methods/shm/shm_setup.hpp"

#include <cerrno>
#include <chrono>

#include <sys/epoll.h>
#include <unistd.h>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_notifier.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

ShmSetup::ShmSetup(const Options& options, ShmSetupHost& host, Connections& connections,
                   ShmVisits& visits, ShmPeerTable& peers, kit::Deadlines& timers,
                   OutOfDescriptors& descriptors)
    : options_(options),
      host_(host),
      connections_(connections),
      visits_(visits),
      peers_(peers),
      timers_(timers),
      descriptors_(descriptors),
      hellos_(options),
      acceptor_(*this, timers, support::LogArea::shm, "shm") {
    acceptor_.set_limits(options.pending_per_source, options.setup_timeout);
}

ShmSetup::~ShmSetup() {
    if (listen_fd_ >= 0) close(listen_fd_);
}

int ShmSetup::start(const std::string& listen_name, bool any_port, int epoll_fd) {
    epoll_fd_ = epoll_fd;
    if (listen_name.empty()) return 0;
    return listen(listen_name, any_port);
}

int ShmSetup::listen(const std::string& listen_name, bool any_port) {
    std::string name = listen_name;
    int fd = -1;
    int rc = any_port ? listen_on_free_port(listen_name, fd, name) : listen_on(listen_name, fd);
    if (rc != 0) return rc;  // listen_on and listen_on_free_port said why
    return adopt_listener(fd, name);
}

int ShmSetup::adopt_listener(int fd, const std::string& name) {
    listen_fd_ = fd;
    hellos_.listen_as(name);
    acceptor_.keep_reserve();  // to refuse a client when the table fills (shm_descriptors.cpp)
    BMI_LOG(shm, "listening on shm://%s", name.c_str());
    return epoll_set(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, EPOLLIN, listener_tag);
}

Connection* ShmSetup::find(std::uint64_t id) const {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
}

void ShmSetup::on_deadline(kit::DeadlineKey key) {
    if (kit::Acceptor::owns(key)) {
        acceptor_.on_deadline(key, std::chrono::steady_clock::now());
        return;
    }
    Connection* conn = find(key.id);
    // Open or closed since: nothing to do.
    if (conn != nullptr && conn->state != ConnState::open) on_setup_step(*conn, key.kind);
}

void ShmSetup::set_listener_interest(bool on) {
    if (epoll_set(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, on ? EPOLLIN : 0u, listener_tag) == 0)
        listener_paused_ = !on;
    host_.arm_sweep();  // a paused listener keeps the sweep running, which resumes it
}

std::optional<std::uint64_t> ShmSetup::start_accepted(const kit::AcceptedSocket& socket) {
    auto conn = std::make_unique<Connection>();
    conn->id = next_connection_++;
    conn->key_handshake = hellos_.handshake();
    conn->fd = socket.fd;
    conn->state = ConnState::await_hello;
    conn->peer_pid = static_cast<pid_t>(socket.peer_id);
    conn->peer_regions.limit(options_.budgets.offer_bytes, options_.budgets.offer_count);
    // The client's hello (and, keyed, its proof) must come by then.
    conn->setup_deadline = std::chrono::steady_clock::now() + options_.setup_timeout;
    if (epoll_set(epoll_fd_, EPOLL_CTL_ADD, socket.fd, EPOLLIN | EPOLLRDHUP, conn->id) != 0) {
        close(socket.fd);
        conn->fd = -1;
        return std::nullopt;
    }
    Connection& added = *connections_.emplace(conn->id, std::move(conn)).first->second;
    host_.arm_sweep();
    watch_setup(added);
    return added.id;
}

void ShmSetup::on_socket_event(Connection& conn, std::uint32_t events) {
    int rc = 0;
    switch (conn.state) {
        case ConnState::backlog_full:  // no socket in the epoll set: cannot happen
        case ConnState::await_ticket:
            return;
        case ConnState::connecting:
            if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
            rc = connect_result(conn.fd);
            if (rc == 0) {
                pid_t pid = 0;
                rc = peer_is_same_user(conn.fd, pid) ? 0 : -BMI_EACCES;
                conn.peer_pid = pid;
            }
            if (rc == 0) rc = hellos_.send_hello(conn);
            if (rc == 0)
                rc = epoll_set(epoll_fd_, EPOLL_CTL_MOD, conn.fd, EPOLLIN | EPOLLRDHUP, conn.id);
            if (rc == 0) visits_.note_work(conn);  // awaiting the reply
            break;
        case ConnState::await_hello:
        case ConnState::await_reply:
        case ConnState::await_proof:
            rc = advance_handshake(conn);
            break;
        case ConnState::open:  // the method's
            return;
    }
    if (rc != 0) host_.close_connection(conn, rc);
}

int ShmSetup::advance_handshake(Connection& conn) {
    switch (conn.state) {
        case ConnState::await_hello:
            return receive_hello(conn);
        case ConnState::await_reply:
            return receive_reply(conn);
        case ConnState::await_proof:
            if (const int rc = hellos_.receive_proof(conn); rc != 1) return rc;
            return admit_proven(conn);
        default:
            return 0;
    }
}

int ShmSetup::ensure_connection(Operation& op, Connection*& out) {
    auto& peer = static_cast<ShmPeer&>(*op.peer);
    if (peer.connection != 0) {
        out = find(peer.connection);
        if (out != nullptr) return 0;
        peer.connection = 0;
    }
    // A peer without a listen name can only be reached over the connection it opened.
    if (peer.name.empty()) return -BMI_ECONNRESET;
    return open_connection(std::static_pointer_cast<ShmPeer>(op.peer_ref), out);
}

int ShmSetup::open_connection(const std::shared_ptr<ShmPeer>& peer, Connection*& out) {
    // An earlier connection showed this ticket; the server may have restarted since and
    // forgotten it. Asking costs one loopback handshake per reconnect, made by the control
    // layer once our lock is released (ticket_renewed).
    const bool ask_first = peer->route && peer->route_used && peer->route->want_renewal();
    if (peer->route) peer->route_used = true;
    auto conn = std::make_unique<Connection>();
    conn->id = next_connection_++;
    conn->key_handshake = hellos_.handshake();
    conn->initiator = true;
    conn->peer = peer;
    conn->peer_regions.limit(options_.budgets.offer_bytes, options_.budgets.offer_count);
    int rc = conn->segment.create(options_.slot_count, options_.slot_size);
    if (rc != 0) return rc;
    rc = visits_.take_bell_index(*conn);
    if (rc != 0) return rc;
    // Until it is in connections_, no close gives the index back.
    struct GiveBack {
        ShmVisits* visits;
        Connection* conn;
        ~GiveBack() {
            if (conn != nullptr) visits->give_back_bell_index(*conn);
        }
    } give_back{&visits_, conn.get()};
    conn->tx = conn->segment.ring(0);
    conn->rx = conn->segment.ring(1);
    conn->own_board = conn->segment.board(0);
    conn->peer_board = conn->segment.board(1);
    conn->own_socket_sent = conn->segment.socket_messages(0);
    conn->peer_socket_sent = conn->segment.socket_messages(1);
    // From the first try until the listener's reply, backlog retries included.
    conn->setup_deadline = std::chrono::steady_clock::now() + options_.setup_timeout;
    if (ask_first)
        conn->state = ConnState::await_ticket;
    else if (rc = start_connect(*conn); rc != 0)
        return rc;
    peer->connection = conn->id;
    out = conn.get();
    give_back.conn = nullptr;
    BMI_LOG(shm, "connection %llu to shm://%s", static_cast<unsigned long long>(conn->id),
            peer->name.c_str());
    connections_.emplace(conn->id, std::move(conn));
    host_.arm_sweep();
    watch_setup(*out);
    visits_.note_work(*out);  // awaiting the reply
    return 0;
}

void ShmSetup::ticket_renewed(const kit::SameNodeRoute& route) {
    std::vector<std::uint64_t> waiting;
    for (const auto& [id, conn] : connections_)
        if (conn->state == ConnState::await_ticket && conn->peer &&
            conn->peer->route.get() == &route)
            waiting.push_back(id);
    for (std::uint64_t id : waiting) {
        Connection* conn = find(id);
        if (conn == nullptr) continue;
        conn->state = ConnState::connecting;
        if (int rc = start_connect(*conn); rc != 0) {
            host_.close_connection(*conn, rc);
            continue;
        }
        if (conn->state == ConnState::backlog_full)
            timers_.schedule({conn->id, kit::DeadlineKind::connect_retry}, conn->retry_at);
        visits_.note_work(*conn);
    }
}

int ShmSetup::receive_hello(Connection& conn) {
    Hello hello{};
    int fds[3] = {-1, -1, -1};
    int fd_count = 0;
    // The hello's descriptors must fit: the kernel drops what does not, and the hello with
    // them. One more for the reply's.
    if (!acceptor_.make_room(conn.fd, 4, conn.id)) return refuse_for_descriptors(conn);
    long n = receive_with_fds(conn.fd, &hello, sizeof hello, fds, 3, fd_count);
    if (n == -EAGAIN) return 0;
    if (n == -EMFILE) return refuse_for_descriptors(conn);
    bool ok = n == static_cast<long>(sizeof hello) && fd_count == 3 && hello_well_formed(hello);
    if (!ok) {
        for (int i = 0; i < fd_count; ++i) close(fds[i]);
        if (n != 0) BMI_LOG(error, "shm: malformed hello on connection, closing it");
        return -BMI_EPROTO;
    }
    if (int rc = hellos_.check_hello(conn, hello); rc != 0) {
        for (int i = 0; i < fd_count; ++i) close(fds[i]);
        return rc;
    }
    conn.peer_event_fd = fds[1];  // closed with the connection, whatever it is
    int rc = adopt_notifier(fds[1], conn.peer_pid);
    if (rc != 0) {
        close(fds[0]);
        close(fds[2]);
        return rc;
    }
    rc = conn.peer_bell.attach(fds[2]);
    if (rc != 0) {
        close(fds[0]);
        return rc;
    }
    conn.peer_bell_index = hello.doorbell_index;
    conn.peer_unexpected_limit = static_cast<bmi_size_t>(hello.unexpected_limit);
    rc = conn.segment.attach(fds[0], hello.slot_count, hello.slot_size);
    if (rc == 0) rc = visits_.take_bell_index(conn);
    if (rc != 0) return rc;
    conn.tx = conn.segment.ring(1);
    conn.rx = conn.segment.ring(0);
    conn.own_board = conn.segment.board(1);
    conn.peer_board = conn.segment.board(0);
    conn.own_socket_sent = conn.segment.socket_messages(1);
    conn.peer_socket_sent = conn.segment.socket_messages(0);
    if (conn.key_handshake.keyed()) return hellos_.answer_keyed_hello(conn, hello);
    conn.peer = peers_.bind_hello(hello, conn.peer_pid, hellos_.keyed());
    if (conn.peer->connection == 0 || find(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    const bool replied = hellos_.send_reply(conn);
    mark_open(conn);
    visits_.mark_busy(conn);  // the initiator may have filled its ring before it knew our doorbell
    if (!replied) {
        // The initiator left before our answer: it may fill its ring before the handshake
        // ends, so sends it completed (an unexpected request, then BMI_DROP_ADDR) wait there.
        host_.take_last_messages(conn);
        return -BMI_ECONNRESET;
    }
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d)",
            static_cast<unsigned long long>(conn.id), peer_address(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

int ShmSetup::admit_proven(Connection& conn) {
    // With a key a peer is bound only once the initiator proved it (here).
    conn.peer = peers_.bind_hello(conn.hello_received, conn.peer_pid, hellos_.keyed());
    if (conn.peer->connection == 0 || find(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    mark_open(conn);
    // The initiator may have filled its ring already, and rung for nothing.
    visits_.mark_busy(conn);
    host_.wake_self();
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d), key proven",
            static_cast<unsigned long long>(conn.id), peer_address(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

int ShmSetup::receive_reply(Connection& conn) {
    HelloReply reply{};
    int fds[2] = {-1, -1};
    int fd_count = 0;
    long n = receive_with_fds(conn.fd, &reply, sizeof reply, fds, 2, fd_count);
    if (n == -EAGAIN) return 0;
    if (n == 0) return -BMI_ECONNREFUSED;  // the acceptor refused our hello
    if (n == -EMFILE) {
        descriptors_.warn(("the reply of pid " + std::to_string(conn.peer_pid)).c_str());
        return -BMI_EMFILE;
    }
    auto close_fds = [&] {
        for (int i = 0; i < fd_count; ++i) close(fds[i]);
    };
    if (n == static_cast<long>(sizeof reply) && reply.magic == hello_magic &&
        reply.status == -BMI_EMFILE) {
        close_fds();
        BMI_WARN("shm: pid %d refused our connection: it is out of file descriptors",
                 static_cast<int>(conn.peer_pid));
        return -BMI_ECONNREFUSED;
    }
    if (n == static_cast<long>(sizeof reply) && reply.magic == hello_magic &&
        reply.status == -BMI_EACCES) {
        close_fds();
        const int rc = hellos_.check_reply(conn, reply);  // the kit says why we are refused
        return rc != 0 ? rc : -BMI_EACCES;
    }
    if (n != static_cast<long>(sizeof reply) || fd_count != 2 || !reply_well_formed(reply)) {
        close_fds();
        return -BMI_EPROTO;
    }
    conn.peer_event_fd = fds[0];
    if (int rc = adopt_notifier(fds[0], conn.peer_pid); rc != 0) {
        close(fds[1]);
        return rc;
    }
    if (int rc = conn.peer_bell.attach(fds[1]); rc != 0) return rc;
    conn.peer_bell_index = reply.doorbell_index;
    conn.peer_unexpected_limit = static_cast<bmi_size_t>(reply.unexpected_limit);
    if (int rc = hellos_.check_reply(conn, reply); rc != 0) return rc;
    conn.peer->pid = conn.peer_pid;
    mark_open(conn);
    visits_.mark_busy(conn);  // a keyed acceptor may have rung before our rings were live
    // Whatever we placed before the peer attached went unannounced: announce it once.
    conn.peer_bell.ring(conn.peer_bell_index);
    conn.write_peer_event();
    return 0;
}

}  // namespace bmi::method::shm
