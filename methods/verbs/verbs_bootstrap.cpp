// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection setup. A nonblocking TCP socket carries one HELLO each way (QPN, PSN, LID, GID,
// MTU, credits); every step is driven from progress(), so no caller ever waits for a peer.
// The socket then stays open as the peer's liveness signal.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "methods/kit/socket_options.hpp"
#include "methods/verbs/verbs_method_impl.hpp"
#include "methods/verbs/verbs_peer_checks.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/optional_library/ibverbs.hpp"

namespace bmi::method::verbs {

namespace {
std::string ip_text(const sockaddr_storage& ss, std::uint16_t* port) {
    char text[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
        inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        if (port) *port = ntohs(a.sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
        inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
        if (port) *port = ntohs(a.sin6_port);
    }
    return text;
}

// The bootstrap socket stays open for the connection's life: a node that is gone is found by
// the kernel's silent-peer bound on it, since the queue pair alone never notices.
void set_socket_options(int fd, std::chrono::milliseconds silent_peer) {
    kit::set_socket_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    kit::bound_silence(fd, silent_peer);
}
}  // namespace

int VerbsMethod::open_listener(const std::string& host, std::uint16_t port) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* result = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result) != 0 ||
        result == nullptr)
        return -BMI_EINVAL;
    std::memcpy(&ss, result->ai_addr, result->ai_addrlen);
    len = result->ai_addrlen;
    freeaddrinfo(result);
    listener_.fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener_.fd < 0) return support::bmi_error_from_errno(errno);
    kit::set_socket_int(listener_.fd, SOL_SOCKET, SO_REUSEADDR, 1);
    if (bind(listener_.fd, reinterpret_cast<sockaddr*>(&ss), len) < 0 ||
        listen(listener_.fd, 128) < 0)
        return support::bmi_error_from_errno(errno);
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    getsockname(listener_.fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    std::uint16_t actual = 0;
    ip_text(bound, &actual);
    listener_.address = "verbs://" + support::format_host_port(host, actual);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = listener_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd, &ev) < 0)
        return support::bmi_error_from_errno(errno);
    acceptor_.keep_reserve();  // to shed a connection when the table fills
    BMI_LOG(verbs, "verbs: listening on %s", listener_.address.c_str());
    return 0;
}

Connection& VerbsMethod::add_connection(int fd, bool outbound) {
    auto c = std::make_unique<Connection>();
    c->key_handshake = kit::KeyHandshake(keys_);
    c->id = next_connection_id_++;
    c->fd = fd;
    c->outbound = outbound;
    c->state = outbound ? Connection::State::connecting : Connection::State::awaiting_hello;
    c->setup_deadline = std::chrono::steady_clock::now() + timeouts_.setup;
    Connection& ref = *c;
    connections_.emplace(c->id, std::move(c));
    watch_setup(ref);
    epoll_event ev{};
    ev.events = outbound ? EPOLLOUT : EPOLLIN;
    ev.data.u64 = ref.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    return ref;
}

Connection* VerbsMethod::connection_for(const std::shared_ptr<VerbsPeer>& peer, int& error) {
    if (peer->connection != nullptr) return peer->connection;
    if (device_failed_ != 0) {
        error = device_failed_;
        return nullptr;
    }
    if (peer->target_length == 0) {
        // Known only through a connection it made to us, which is gone: we cannot call back.
        error = peer->last_error != 0 ? peer->last_error : -BMI_ECONNRESET;
        return nullptr;
    }
    int fd = socket(peer->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = support::bmi_error_from_errno(errno);
        return nullptr;
    }
    set_socket_options(fd, timeouts_.silent_peer);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&peer->target), peer->target_length) < 0 &&
        errno != EINPROGRESS) {
        error = support::bmi_error_from_errno(errno);
        close(fd);
        return nullptr;
    }
    Connection& c = add_connection(fd, true);
    attach_peer(c, peer);
    peer->connection = &c;
    if (int rc = create_qp(c); rc < 0) {
        error = rc;
        fail_connection(c, rc);
        return nullptr;
    }
    BMI_LOG(verbs, "verbs: connecting to %s", peer->canonical.c_str());
    return &c;
}

int VerbsMethod::create_qp(Connection& c) {
    if (static_cast<int>(queue_pairs_.size()) >= device_->max_connections) {
        BMI_LOG(error, "verbs: more than %d connections; raise BMI_VERBS_MAX_CONNECTIONS",
                device_->max_connections);
        return -BMI_ENOMEM;
    }
    ibv_qp_init_attr ia{};
    ia.send_cq = device_->cq;
    ia.recv_cq = device_->cq;
    ia.srq = device_->srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = sq_depth;
    ia.cap.max_send_sge =
        static_cast<std::uint32_t>(std::max(device_->max_send_sge, device_->max_read_sge));
    c.qp = support::ibv().create_qp(device_->pd, &ia);
    if (c.qp == nullptr) return -BMI_ENOMEM;
    c.sq_depth = sq_depth;
    c.sq_free = sq_depth;
    queue_pairs_.add(c);
    static thread_local std::minstd_rand psn_source{std::random_device{}()};
    c.psn = psn_source() & 0xffffff;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = device_->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
    if (support::ibv().modify_qp(
            c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        return -BMI_EIO;
    return 0;
}

// INIT -> RTR -> RTS with what the other side's HELLO told us.
int VerbsMethod::connect_qp(Connection& c, const Hello& remote) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = std::min(device_->mtu, static_cast<ibv_mtu>(remote.mtu));
    a.dest_qp_num = remote.qp_num;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = static_cast<std::uint8_t>(device_->max_dest_rd_atomic);
    a.min_rnr_timer = 12;  // 0.64 ms before the sender retries an empty SRQ
    a.ah_attr.dlid = remote.lid;
    a.ah_attr.port_num = device_->port;
    a.ah_attr.sl = static_cast<std::uint8_t>(qos_.service_level);  // the plane's QoS, else 0
    // RoCE has no LIDs: every packet needs a GRH with the GID index we chose.
    if (device_->ethernet || remote.lid == 0) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.traffic_class = static_cast<std::uint8_t>(qos_.traffic_class);
        std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
        a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(device_->gid_index);
        a.ah_attr.grh.hop_limit = 64;
    }
    if (support::ibv().modify_qp(c.qp, &a,
                                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                     IBV_QP_MIN_RNR_TIMER) != 0)
        return -BMI_EPROTO;
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = 17;  // 0.5 s per try; the bootstrap socket notices dead peers sooner
    s.retry_cnt = 7;
    s.rnr_retry = 7;  // infinite: an SRQ that is briefly empty only delays
    s.sq_psn = c.psn;
    s.max_rd_atomic = static_cast<std::uint8_t>(device_->max_rd_atomic);
    if (support::ibv().modify_qp(c.qp, &s,
                                 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) !=
        0)
        return -BMI_EPROTO;
    c.send_credits = static_cast<int>(remote.credits);
    c.peer_unexpected_limit = static_cast<bmi_size_t>(remote.unexpected_limit);
    c.send_window = c.send_credits;
    c.granted_credits = device_->choice.credits;  // what fill_hello announced
    return 0;
}

void VerbsMethod::fill_hello(const Connection& c, Hello& h) const {
    h.qp_num = c.qp->qp_num;
    h.psn = c.psn;
    h.lid = device_->lid;
    h.mtu = static_cast<std::uint8_t>(device_->mtu);
    h.credits = static_cast<std::uint32_t>(device_->choice.credits);
    h.eager_payload = eager_payload;
    h.unexpected_limit = static_cast<std::uint32_t>(unexpected_limit_);
    std::memcpy(h.gid, device_->gid.raw, 16);
    const std::size_t n = std::min<std::size_t>(listener_.address.size(), max_name);
    std::memcpy(h.name, listener_.address.data(), n);
    h.name_length = static_cast<std::uint16_t>(n);
}

std::optional<std::string> VerbsMethod::source_of(kit::AcceptedSocket& socket) {
    return ip_text(socket.from, nullptr);
}

std::optional<std::uint64_t> VerbsMethod::start_accepted(const kit::AcceptedSocket& socket) {
    std::uint16_t port = 0;
    std::string host = ip_text(socket.from, &port);
    set_socket_options(socket.fd, timeouts_.silent_peer);
    Connection& c = add_connection(socket.fd, false);
    // Its own peer, never merged with a known one: a connection is its own address, and
    // it joins peers_ only once the handshake is done (became_ready).
    auto peer = std::make_shared<VerbsPeer>();
    peer->host = std::move(host);
    peer->remote_text = support::format_host_port(peer->host, port);
    attach_peer(c, peer);
    return c.id;
}

void VerbsMethod::close_for_room(std::uint64_t id) {
    auto it = connections_.find(id);
    if (it != connections_.end()) fail_connection(*it->second, -BMI_ECONNRESET);
}

void VerbsMethod::offer_for_shedding(kit::SheddingChoice& choice) {
    using State = Connection::State;
    for (auto& [id, owned] : connections_) {
        const Connection& c = *owned;
        if (c.outbound || c.fd < 0) continue;
        const auto accepted_at = c.setup_deadline - timeouts_.setup;
        if (acceptor_.unproven(id)) {
            choice.offer(id, accepted_at, true);
            continue;
        }
        const VerbsPeer* peer = c.peer.get();
        const bool unused = c.state == State::ready && peer != nullptr && peer->addr() == 0 &&
                            peer->arrivals.empty() && peer->posted_recvs.empty() &&
                            c.sends.empty() && c.controls.empty() && c.reads.empty() &&
                            c.parked.empty();
        if (unused) choice.offer(id, accepted_at, false);
    }
}

void VerbsMethod::set_listener_interest(bool on) {
    if (listener_.fd < 0 || listener_.watched == on) return;
    epoll_event ev{};
    ev.events = on ? std::uint32_t{EPOLLIN} : 0u;
    ev.data.u64 = listener_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listener_.fd, &ev) == 0) listener_.watched = on;
}

bool VerbsMethod::flush_out(Connection& c) {
    while (c.out_done < c.out.size()) {
        ssize_t n = send(c.fd, c.out.data() + c.out_done, c.out.size() - c.out_done, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            fail_connection(c, -BMI_ECONNRESET);
            return false;
        }
        c.out_done += static_cast<std::size_t>(n);
    }
    if (c.out_done == c.out.size()) {
        c.out.clear();
        c.out_done = 0;
    }
    update_interest(c);
    return true;
}

void VerbsMethod::update_interest(Connection& c) {
    if (c.fd < 0) return;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (c.out.empty() ? 0u : static_cast<std::uint32_t>(EPOLLOUT));
    ev.data.u64 = c.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void VerbsMethod::on_socket(Connection& c, std::uint32_t events) {
    using State = Connection::State;
    if (c.state == State::connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) {
            fail_connection(c, err == ECONNREFUSED ? -BMI_ECONNREFUSED : -BMI_EHOSTUNREACH);
            return;
        }
        if ((events & EPOLLOUT) == 0) return;
        Hello h;
        fill_hello(c, h);
        offer_key(c, h);
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(&h);
        c.out.assign(bytes, bytes + sizeof h);
        c.state = State::hello_sent;
        if (!flush_out(c)) return;
    }
    if ((events & EPOLLOUT) != 0 && !c.out.empty() && !flush_out(c)) return;
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) == 0) return;
    std::uint8_t scratch[512];
    for (;;) {
        ssize_t n = recv(c.fd, scratch, sizeof scratch, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            // ETIMEDOUT: the kernel's silent-peer bound ended it (set_socket_options).
            const int error = n < 0 && errno == ETIMEDOUT ? -BMI_ETIMEDOUT : -BMI_ECONNRESET;
            // The peer process is gone, or dropped our address. What it sent before that
            // (sends it saw complete) may still wait in our completion queue, and a failed
            // connection's arrivals are discarded: take them first. The completions may retire
            // this connection, so look it up again afterwards.
            const std::uint64_t id = c.id;
            poll_cq();
            auto it = connections_.find(id);
            if (it != connections_.end()) fail_connection(*it->second, error);
            return;
        }
        if (n < 0) return;
        c.in.insert(c.in.end(), scratch, scratch + n);
        if (c.state == State::hello_sent || c.state == State::awaiting_hello) {
            // HELLOs of other versions differ in size too: refuse one before waiting for ours.
            if (c.in.size() >= hello_version_end && !hello_speaks_our_protocol(c.in)) {
                std::uint16_t version = 0;
                std::memcpy(&version, c.in.data() + offsetof(Hello, version), sizeof version);
                BMI_LOG(error,
                        "verbs: connection %llu: the peer speaks verbs protocol version %u, we "
                        "%u (a libbmi of another release); closed",
                        static_cast<unsigned long long>(c.id), static_cast<unsigned>(version),
                        static_cast<unsigned>(protocol_version));
                fail_connection(c, -BMI_EPROTO);
                return;
            }
            if (c.in.size() < sizeof(Hello)) continue;
            Hello remote;
            std::memcpy(&remote, c.in.data(), sizeof remote);
            c.in.erase(c.in.begin(), c.in.begin() + sizeof remote);
            on_hello(c, remote);
            if (c.state == State::failed) return;
        }
        if (c.state == State::awaiting_proof) {
            if (c.in.size() < sizeof(KeyProof)) continue;
            on_client_proof(c);
            if (c.state == State::failed) return;
        }
        if (c.state == State::awaiting_go) {
            if (c.in.empty()) continue;
            on_go(c);
            if (c.state == State::failed) return;
        }
        if (!c.outbound && !c.ready_seen && !c.in.empty() &&
            (c.state == State::awaiting_ready || c.state == State::ready)) {
            // The byte alone proves nothing: the first SEND on the QP makes us ready.
            if (c.in.front() != ready_byte) {
                fail_connection(c, -BMI_EPROTO);
                return;
            }
            c.in.erase(c.in.begin());
            c.ready_seen = true;
        }
        if ((c.state == State::ready || c.ready_seen) && !c.in.empty()) {
            // Nothing may follow the handshake on this socket.
            fail_connection(c, -BMI_EPROTO);
            return;
        }
    }
}

void VerbsMethod::on_hello(Connection& c, const Hello& remote) {
    if (hello_speaks_our_protocol(remote) && c.outbound &&
        (remote.features & feature_key_required) != 0 &&
        (remote.features & feature_key_proof) == 0) {
        (void)check_answer(c, remote);  // a refusal: the kit says why we are refused
        return;
    }
    if (!hello_well_formed(remote)) {
        BMI_LOG(error, "verbs: malformed HELLO on connection %llu",
                static_cast<unsigned long long>(c.id));
        fail_connection(c, -BMI_EPROTO);
        return;
    }
    if (!c.outbound) {
        if (!check_keyed_hello(c, remote)) return;
        if (remote.name_length > 0)
            BMI_LOG(verbs, "verbs: connection %llu from %s says it listens at %.*s (not trusted)",
                    static_cast<unsigned long long>(c.id), c.peer->remote_text.c_str(),
                    static_cast<int>(remote.name_length), remote.name);
        if (int rc = create_qp(c); rc < 0) {
            fail_connection(c, rc);
            return;
        }
        if (c.key_handshake.keyed()) {
            answer_keyed_hello(c, remote);  // our QP waits in INIT for the client's proof
            return;
        }
    }
    std::optional<kit::Proof> our_proof;
    if (c.outbound && !(our_proof = check_answer(c, remote))) return;
    if (int rc = connect_qp(c, remote); rc < 0) {
        fail_connection(c, rc);
        return;
    }
    if (c.outbound && c.key_handshake.keyed()) {
        send_client_proof(c, *our_proof);  // theirs stays in INIT until it checks
        return;
    }
    if (c.outbound) {
        // Our QP is in RTS and theirs in RTR since before they answered: tell them.
        c.out.push_back(static_cast<std::uint8_t>(ready_byte));
        if (!flush_out(c)) return;
        became_ready(c);
        // The server waits for a SEND on the QP before it counts us ready: send one now even
        // if we have nothing else to say. A CREDIT costs no credit.
        queue_control(c, MsgType::credit, 0, FinStatus::ok);
        return;
    }
    Hello h;
    fill_hello(c, h);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&h);
    c.out.assign(bytes, bytes + sizeof h);
    c.state = Connection::State::awaiting_ready;
    flush_out(c);
}

void VerbsMethod::became_ready(Connection& c) {
    c.state = Connection::State::ready;
    acceptor_.release(c.id);  // through its handshake
    auto& peer = *c.peer;
    // With two connections to one peer (both sides called at once) the first one carries
    // our traffic; the other still delivers what arrives on it.
    if (peer.connection == nullptr) peer.connection = &c;
    if (!c.outbound) {
        adopt_announced_name(c);
        peers_.add(c.peer);
        sink_.register_peer(c.peer);
    }
    device_->grow_srq(static_cast<std::uint32_t>(device_->choice.srq_base) +
                      static_cast<std::uint32_t>(connections_.size()) *
                          static_cast<std::uint32_t>(device_->choice.credits));
    BMI_LOG(verbs, "verbs: connection %llu to %s ready (qpn %u)",
            static_cast<unsigned long long>(c.id), describe_peer(peer).c_str(), c.qp->qp_num);
    schedule(c);
}

}  // namespace bmi::method::verbs
