// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection lifecycle: connect, accept, handshake outcome, peer binding, failure and teardown.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

Connection* TcpMethod::find_connection(std::uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
}

Connection& TcpMethod::add_connection(int fd, bool outbound, std::uint32_t events) {
    auto c = std::make_unique<Connection>();
    c->id = next_connection_id_++;
    c->fd = fd;
    c->outbound = outbound;
    c->last_read = std::chrono::steady_clock::now();
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c->id;
    // ADD on a fresh fd fails only for resource exhaustion; the socket then never reports and
    // its ops fail by the stall timer or the peer's keepalive, so the error is only logged.
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0)
        BMI_LOG(tcp, "tcp: epoll_ctl add failed: errno %d", errno);
    c->events = events;
    Connection& ref = *c;
    connections_.emplace(ref.id, std::move(c));
    return ref;
}

Connection* TcpMethod::connection_for_send(const std::shared_ptr<TcpPeer>& peer, int& error) {
    if (peer->send_connection != nullptr && !peer->send_connection->closed)
        return peer->send_connection;
    return open_outbound(peer, error);
}

Connection* TcpMethod::open_outbound(const std::shared_ptr<TcpPeer>& peer, int& error) {
    if (peer->target.empty()) {
        // A peer that reached us first can be called back only at the address it announced.
        auto parsed = parse_tcp_address(peer->canonical);
        if (!parsed) {
            error = -BMI_ECONNRESET;
            return nullptr;
        }
        if (error = resolve(parsed->host, parsed->port, peer->target); error < 0) return nullptr;
    }
    int fd = -1;
    if (error = start_connect(peer->target, buffer_sizes_, fd); error < 0) return nullptr;
    Connection& c = add_connection(fd, true, EPOLLOUT);
    c.state = ConnState::connecting;
    c.peer = peer;
    c.remote = peer->target;
    peer->connections.push_back(&c);
    if (peer->send_connection == nullptr || peer->send_connection->closed)
        peer->send_connection = &c;
    BMI_LOG(tcp, "tcp: connecting to %s (connection %llu)", describe(peer->target).c_str(),
            static_cast<unsigned long long>(c.id));
    return &c;
}

void TcpMethod::accept_all() {
    for (;;) {
        SocketAddress from;
        from.length = sizeof from.storage;
        int fd = accept4(listen_fd_, from.get(), &from.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                BMI_LOG(tcp, "tcp: accept failed: errno %d", errno);
            return;
        }
        configure_socket(fd, buffer_sizes_);
        Connection& c = add_connection(fd, false, EPOLLIN);
        c.state = ConnState::await_first;
        c.remote = from;
        BMI_LOG(tcp, "tcp: accepted %s (connection %llu)", describe(from).c_str(),
                static_cast<unsigned long long>(c.id));
    }
}

void TcpMethod::finish_connect(Connection& c) {
    if (int err = socket_error(c.fd); err < 0) {
        BMI_LOG(tcp, "tcp: connect to %s failed: %s", describe(c.remote).c_str(),
                support::error_name(err));
        fail_connection(c, err, true);
        return;
    }
    c.peer->remote = c.remote;
    if (force_legacy_ || c.peer->legacy) {
        c.peer->legacy = true;
        c.state = ConnState::established;
        c.v2 = false;
    } else {
        // Only HELLO goes out until the acceptor shows whether it speaks v2.
        c.state = ConnState::await_ack;
        OutFrame hello;
        hello.body = encode_hello(Hello{feature_rendezvous, listen_address_}, false);
        c.control_queue.push_back(std::move(hello));
    }
    BMI_LOG(tcp, "tcp: connected to %s (%s)", describe(c.remote).c_str(),
            c.state == ConnState::established ? "legacy" : "hello sent");
    flush(c);
}

void TcpMethod::bind_peer(Connection& c, const std::string& announced, bool legacy) {
    std::shared_ptr<TcpPeer> peer;
    std::string canonical;
    if (auto parsed = parse_tcp_address(announced)) {
        canonical = parsed->canonical;
        peer = peers_.named(canonical);
    }
    if (!peer) {
        peer = std::make_shared<TcpPeer>();
        peer->canonical = canonical;
        peers_.add(peer);
    }
    peer->remote = c.remote;
    if (legacy) peer->legacy = true;
    c.peer = peer;
    peer->connections.push_back(&c);
    // Reuse a connection the peer opened to us rather than opening a second one.
    if (peer->send_connection == nullptr || peer->send_connection->closed)
        peer->send_connection = &c;
    BMI_LOG(tcp, "tcp: connection %llu is %s peer %s", static_cast<unsigned long long>(c.id),
            legacy ? "legacy" : "v2", describe_peer(*peer).c_str());
}

void TcpMethod::connection_broken(Connection& c, int error) {
    // An OrangeFS acceptor drops the connection on HELLO's magic.
    if (c.outbound && c.state == ConnState::await_ack) {
        fall_back_to_legacy(c);
        return;
    }
    BMI_LOG(tcp, "tcp: connection %llu to %s lost: %s", static_cast<unsigned long long>(c.id),
            describe(c.remote).c_str(), support::error_name(error));
    fail_connection(c, error, true);
}

void TcpMethod::fall_back_to_legacy(Connection& c) {
    std::shared_ptr<TcpPeer> peer = c.peer;
    peer->legacy = true;
    BMI_LOG(tcp, "tcp: %s closed before HELLO_ACK; speaking legacy to it",
            describe(c.remote).c_str());
    // Nothing but HELLO was written, so every queued send can move to the new connection.
    OpList moved;
    moved.splice(moved.end(), c.small_queue);
    retire(c);
    int error = 0;
    Connection* next = open_outbound(peer, error);
    while (!moved.empty()) {
        Operation& op = moved.front();
        moved.pop_front();
        if (next == nullptr) {
            finish(op, error);
        } else if (op.total_size > legacy_message_limit) {
            finish(op, -BMI_EMSGSIZE);
        } else {
            op.method_ptr = next;
            next->small_queue.push_back(op);
        }
    }
    if (next == nullptr && peer->connections.empty()) fail_posted_recvs(*peer, error);
}

void TcpMethod::fail_connection(Connection& c, int error, bool peer_dead) {
    if (c.closed) return;
    std::shared_ptr<TcpPeer> peer = c.peer;
    // Collect first: finishing calls into the Sink, and the queues must be empty by then.
    std::vector<Operation*> failed;
    if (c.out && c.out->op != nullptr) failed.push_back(c.out->op);
    c.out.reset();
    c.control_queue.clear();
    while (!c.small_queue.empty()) {
        failed.push_back(&c.small_queue.front());
        c.small_queue.pop_front();
    }
    while (!c.data_queue.empty()) {
        failed.push_back(&c.data_queue.front());
        c.data_queue.pop_front();
    }
    for (auto& [cookie, op] : c.await_cts) failed.push_back(op);
    for (auto& [cookie, op] : c.incoming) failed.push_back(op);
    c.await_cts.clear();
    c.incoming.clear();
    if (c.phase == ReadPhase::body_op && c.read_op != nullptr) failed.push_back(c.read_op);
    c.read_op = nullptr;
    if (c.unexpected_buffer != nullptr) {
        sink_.release_unexpected(c.unexpected_buffer, static_cast<bmi_size_t>(c.header.size));
        c.unexpected_buffer = nullptr;
    }
    retire(c);
    for (Operation* op : failed) finish(*op, error);
    if (peer && peer_dead && peer->connections.empty()) fail_posted_recvs(*peer, error);
}

void TcpMethod::retire(Connection& c) {
    c.closed = true;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    if (c.peer) {
        TcpPeer& p = *c.peer;
        // Headers whose payload would have come on this socket can never complete.
        std::erase_if(p.arrivals, [&](const Arrival& a) {
            return a.kind != Arrival::Kind::eager && a.connection_id == c.id;
        });
        std::erase(p.connections, &c);
        if (p.send_connection == &c)
            p.send_connection = p.connections.empty() ? nullptr : p.connections.front();
    }
    auto it = connections_.find(c.id);
    if (it != connections_.end()) {
        graveyard_.push_back(std::move(it->second));
        connections_.erase(it);
    }
}

void TcpMethod::close_peer(TcpPeer& peer, int error, bool peer_dead) {
    const std::vector<Connection*> conns = peer.connections;
    for (Connection* c : conns) fail_connection(*c, error, peer_dead);
}

void TcpMethod::update_interest(Connection& c) {
    if (c.closed) return;
    std::uint32_t want = 0;
    if (c.state == ConnState::connecting) {
        want = EPOLLOUT;
    } else {
        if (c.phase != ReadPhase::wait_unexpected && c.phase != ReadPhase::wait_match)
            want |= EPOLLIN;
        if (c.has_output()) want |= EPOLLOUT;
    }
    if (want == c.events) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.events = want;
}

}  // namespace bmi::method::tcp
