// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection lifecycle: connect, accept, handshake outcome, peer binding, failure and teardown.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
    c->key_handshake = kit::KeyHandshake(keys_);
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
    // A peer that reached us first is its connection: once that is gone it cannot be called
    // back. Connecting to the address it announced would let any client aim us at any host.
    if (peer->target.empty()) {
        error = -BMI_ECONNRESET;
        return nullptr;
    }
    int fd = -1;
    if (error = start_connect(peer->target, socket_tuning_, listeners_.policy_for(peer->plane),
                              sources_.ports, fd);
        error < 0) {
        BMI_LOG(tcp, "tcp: cannot connect to %s: %s", describe(peer->target).c_str(),
                support::error_name(error));
        return nullptr;
    }
    Connection& c = add_connection(fd, true, EPOLLOUT);
    c.plane = peer->plane;
    c.state = ConnState::connecting;
    c.peer = peer;
    c.remote = peer->target;
    // A listener that queues the connect, or takes it and never answers HELLO, holds the sends
    // waiting on the handshake no longer than an accepted connection may take for its own.
    c.setup_deadline = std::chrono::steady_clock::now() + limits_.setup_timeout;
    timers_.schedule({c.id, kit::DeadlineKind::setup}, c.setup_deadline);
    peer->connections.push_back(&c);
    if (peer->send_connection == nullptr || peer->send_connection->closed)
        peer->send_connection = &c;
    BMI_LOG(tcp, "tcp: connecting to %s (connection %llu)", describe(peer->target).c_str(),
            static_cast<unsigned long long>(c.id));
    return &c;
}

namespace {
SocketAddress remote_of(const kit::AcceptedSocket& socket) {
    SocketAddress from;
    std::memcpy(&from.storage, &socket.from, sizeof from.storage);
    from.length = socket.length;
    return from;
}
}  // namespace

std::optional<std::string> TcpMethod::source_of(kit::AcceptedSocket& socket) {
    const SocketAddress from = remote_of(socket);
    if (refuse_untrusted(from)) return std::nullopt;
    return ip_text(from);
}

std::optional<std::uint64_t> TcpMethod::start_accepted(const kit::AcceptedSocket& socket) {
    const TcpListeners::Listener& listener = listeners_.at(socket.listener);
    const SocketAddress from = remote_of(socket);
    configure_socket(socket.fd, socket_tuning_);
    // The listener's marks were inherited; pacing is per socket and set again here.
    if (int rc = apply_policy(socket.fd, listeners_.policy_for(listener.plane)); rc < 0)
        BMI_LOG(tcp, "tcp: plane options refused on an accepted socket: %s",
                support::error_name(rc));
    Connection& c = add_connection(socket.fd, false, EPOLLIN);
    c.plane = listener.plane;
    c.state = ConnState::await_first;
    c.remote = from;
    c.setup_deadline = std::chrono::steady_clock::now() + limits_.setup_timeout;
    timers_.schedule({c.id, kit::DeadlineKind::setup}, c.setup_deadline);
    watch_deadlines(c);  // on the stall clock before it sends a byte
    BMI_LOG(tcp, "tcp: accepted %s (connection %llu)", describe(from).c_str(),
            static_cast<unsigned long long>(c.id));
    return c.id;
}

bool TcpMethod::refuse_untrusted(const SocketAddress& from) {
    if (!sources_.trusted) return false;
    const char* why = sources_.trusted->refusal(from.get());
    if (why == nullptr) return false;
    if (sources_.refused.should_log(ip_text(from)))
        BMI_WARN("tcp: refused %s: its %s is not trusted (%s); connection closed (more "
                 "refusals of this host are counted for a minute, not logged; %llu so far)",
                 describe(from).c_str(), why, sources_.trusted->text().c_str(),
                 static_cast<unsigned long long>(sources_.refused.refused()));
    return true;
}

void TcpMethod::close_for_room(std::uint64_t id) {
    if (Connection* c = find_connection(id); c != nullptr && !c->closed)
        fail_connection(*c, -BMI_ECONNRESET, true);
}

void TcpMethod::offer_for_shedding(kit::SheddingChoice& choice) {
    const auto unused = [](const Connection& c) {
        const TcpPeer* peer = c.peer.get();
        return peer != nullptr && peer->addr() == 0 && peer->arrivals.empty() &&
               peer->posted_recvs.empty() && c.reader.at_rest() && !c.has_output() &&
               c.writer.small_queue.empty() && c.writer.await_cts.empty();
    };
    for (auto& [id, owned] : connections_) {
        const Connection& c = *owned;
        if (c.closed || c.outbound) continue;
        const auto accepted_at = c.setup_deadline - limits_.setup_timeout;
        if (c.setting_up())
            choice.offer(c.id, accepted_at, true);
        else if (unused(c))
            choice.offer(c.id, accepted_at, false);
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
    if (legacy_.forced || c.peer->legacy) {
        if (keys_.keyed()) {
            refuse(c, kit::Refusal::legacy_framing);
            return;
        }
        c.peer->legacy = true;
        c.state = ConnState::established;
        c.framing = legacy_.framing;
    } else if (!keys_.keyed() && legacy_.framing == Framing::orangefs && !c.peer->wants_key) {
        // OrangeFS frames at once, with the offer in each tag: an OrangeFS server takes them
        // as they are, and a libbmi one answers HELLO_ACK (doc/methods/tcp.md, "Handshake").
        c.state = ConnState::established;
        c.framing = Framing::orangefs;
        c.offering = true;
    } else {
        // A keyed client proves the key before anything else; the standalone framing has no
        // room for the offer.
        start_hello(c);
    }
    BMI_LOG(tcp, "tcp: connected to %s (%s)", describe(c.remote).c_str(),
            c.offering                          ? "offering v2"
            : c.state == ConnState::established ? "legacy"
                                                : "hello sent");
    flush(c);
}

std::size_t TcpMethod::handshakes_open() const {
    std::size_t n = 0;
    for (const auto& [id, c] : connections_)
        n += !c->closed && (c->offering || c->await_hello || c->state != ConnState::established);
    return n;
}

void TcpMethod::start_hello(Connection& c) {
    // Only HELLO goes out until the acceptor shows whether it speaks v2.
    c.offering = false;
    c.state = ConnState::await_ack;
    OutFrame hello;
    hello.body = encode_hello(hello_to_send(c), false);
    c.writer.control_queue.push_back(std::move(hello));
}

void TcpMethod::offer_declined(Connection& c) {
    c.offering = false;
    c.held_for_answer = false;
    c.peer->legacy = true;
    BMI_LOG(tcp, "tcp: %s answered in OrangeFS framing; speaking legacy to it",
            describe(c.remote).c_str());
    refuse_large_recvs(*c.peer);
}

void TcpMethod::accept_offer(Connection& c) {
    c.await_hello = true;
    c.framing = Framing::v2;
    OutFrame ack;
    ack.body = encode_hello(Hello{hello_features(), own_address(c)}, true);
    c.writer.control_queue.push_back(std::move(ack));
    BMI_LOG(tcp, "tcp: connection %llu offers v2; answered HELLO_ACK",
            static_cast<unsigned long long>(c.id));
}

void TcpMethod::bind_peer(Connection& c, const std::string& announced, bool legacy, bool proven) {
    // Every accepted connection is a peer of its own: what it announces is not merged with a
    // peer we know by that name (SPEC §6).
    acceptor_.release(c.id);  // through its handshake
    // Its deadlines would wake us once for nothing; the stall clock starts again at the end
    // of this read pass if a frame is under way.
    timers_.cancel({c.id, kit::DeadlineKind::setup});
    timers_.cancel({c.id, kit::DeadlineKind::stall});
    c.reader.stall_clock.timed = false;
    auto peer = std::make_shared<TcpPeer>();
    peer->announced = announced;
    peer->remote = c.remote;
    peer->legacy = legacy;
    peer->plane = c.plane;
    adopt_announced_name(*peer, proven);
    peers_.add(peer);
    c.peer = peer;
    peer->connections.push_back(&c);
    peer->send_connection = &c;
    BMI_LOG(tcp, "tcp: connection %llu is %s peer %s%s%s", static_cast<unsigned long long>(c.id),
            legacy ? "legacy" : "v2", describe_peer(*peer).c_str(),
            announced.empty() ? "" : ", announcing ", announced.c_str());
}

void TcpMethod::adopt_announced_name(TcpPeer& peer, bool proven) {
    // The key holder's word is good for its own address (PeerNames::may_take), not for a host
    // off this plane.
    auto parsed = parse_tcp_address(peer.announced);
    if (!parsed || parsed->port == 0 || !peers_.may_take_name(parsed->canonical, proven)) return;
    SocketAddress target;
    // Only a literal address is taken here: a name would need the resolver, which may block,
    // and a lookup of the name fills the target in from its own resolution (lookup_prepared).
    if (resolve_literal(parsed->host, parsed->port, target) == 0) {
        if (listeners_.plane_for(target) != peer.plane) return;
        peer.target = target;
    }
    peer.canonical = parsed->canonical;
    BMI_LOG(tcp, "tcp: proven peer answers to its announced address %s", peer.canonical.c_str());
}

void TcpMethod::connection_broken(Connection& c, int error) {
    // An OrangeFS acceptor drops the connection on HELLO's magic.
    if (c.outbound && c.state == ConnState::await_ack) {
        // With a key, never: an OrangeFS server cannot prove it, and neither can whoever
        // closes on us to make us fall back.
        if (keys_.keyed()) {
            refuse(c, kit::Refusal::closed_before_proof);
            return;
        }
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
    moved.splice(moved.end(), c.writer.small_queue);
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
            slots(op).connection = next;
            next->writer.small_queue.push_back(op);
        }
    }
    if (next == nullptr && peer->connections.empty()) {
        fail_posted_recvs(*peer, error);
        return;
    }
    refuse_large_recvs(*peer);
}

void TcpMethod::refuse_large_recvs(TcpPeer& peer) {
    // Receives posted before we knew: refused now, as post() refuses them for a legacy peer.
    std::vector<Operation*> too_large;
    for (Operation& op : peer.posted_recvs)
        if (op.total_size > legacy_message_limit) too_large.push_back(&op);
    for (Operation* op : too_large) {
        peer.posted_recvs.erase(*op);
        finish(*op, -BMI_EINVAL);
    }
}

void TcpMethod::fail_connection(Connection& c, int error, bool peer_dead) {
    if (c.closed) return;
    std::shared_ptr<TcpPeer> peer = c.peer;
    // Collect first: finishing calls into the Sink, and the queues must be empty by then.
    std::vector<Operation*> failed;
    c.writer.release_ops(failed);
    c.reader.release_ops(failed);
    retire(c);
    for (Operation* op : failed) finish(*op, error);
    if (peer && peer_dead && peer->connections.empty()) fail_posted_recvs(*peer, error);
}

void TcpMethod::retire(Connection& c) {
    c.closed = true;
    timers_.cancel_all(c.id);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    listeners_.set_interest(true);  // a descriptor is free again
    acceptor_.release(c.id);
    release_grants(c);
    if (c.peer) {
        release_reservation(c);
        TcpPeer& p = *c.peer;
        // Headers whose payload would have come on this socket can never complete.
        p.arrivals.remove_if(
            [&](const Arrival& a) {
                return a.kind != Arrival::Kind::eager && a.connection_id == c.id;
            },
            [&](const Arrival& a) { uncharge(p, a); });
        std::erase(p.connections, &c);
        if (p.send_connection == &c)
            p.send_connection = p.connections.empty() ? nullptr : p.connections.front();
        if (unreachable(p)) {
            if (p.addr() == 0) {
                // Nobody can name this peer: no receive can ever claim what it left behind.
                drop_arrivals(p);
                peers_.remove(p);
            } else {
                sink_.peer_gone(p);  // the control layer drops it once nothing refers to it
            }
        }
    }
    returner_.freed(static_cast<std::int64_t>(c.reader.memory()));
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
    // Every read pass and every write ends here, so this is where a deadline starts to run.
    watch_deadlines(c);
    std::uint32_t want = 0;
    if (c.state == ConnState::connecting) {
        want = EPOLLOUT;
    } else {
        // A paused connection is not read, so only RDHUP tells us its peer has gone.
        want |= c.reader.paused() ? std::uint32_t{EPOLLRDHUP} : std::uint32_t{EPOLLIN};
        if (c.has_output()) want |= EPOLLOUT;
    }
    if (c.reader.detached) {
        // Reading alone is what a detached connection does by hand; anything else needs epoll.
        if (want != EPOLLIN) reattach(c);
        return;
    }
    if (want == c.events) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.events = want;
}

}  // namespace bmi::method::tcp
