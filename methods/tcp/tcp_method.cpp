// SPDX-License-Identifier: LGPL-2.1-or-later
// TcpMethod entry points: creation, lookup, post, cancel, peers and options.
#include "methods/tcp/tcp_method.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "methods/kit/posted_recvs.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::method::tcp {

int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out) {
    auto method = std::make_unique<TcpMethod>(config, sink);
    if (int rc = method->start(config); rc < 0) return rc;
    out = std::move(method);
    return 0;
}

TcpMethod::TcpMethod(const Config& config, Sink& sink)
    : sink_(sink),
      unexpected_limit_(config.unexpected_limit > 0 ? config.unexpected_limit
                                                    : default_unexpected_limit),
      polling_(static_cast<int>(config.settings.number(SettingId::spin_us)),
               std::chrono::microseconds(config.settings.number(SettingId::read_wait_us))) {
    legacy_.forced = config.settings.flag(SettingId::legacy);
    // The row's choices, in order: dialect, orangefs, standalone.
    switch (config.settings.number(SettingId::legacy_framing)) {
        case 1:
            legacy_.framing = Framing::orangefs;
            break;
        case 2:
            legacy_.framing = Framing::standalone;
            break;
        default:
            legacy_.framing = config.dialect == ApiDialect::standalone ? Framing::standalone
                                                                       : Framing::orangefs;
            break;
    }
}

TcpMethod::~TcpMethod() {
    // The control layer reaped every op before destroying us; only memory and fds remain.
    for (auto& [id, c] : connections_) {
        if (c->fd >= 0) close(c->fd);
        c->writer.small_queue.clear();
        c->writer.data_queue.clear();
    }
    for (auto& [raw, peer] : peers_) {
        peer->posted_recvs.clear();
        drop_arrivals(*peer);
        peer->connections.clear();
        peer->send_connection = nullptr;
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
}

int TcpMethod::start(const Config& config) {
    if (int rc = source_ports_for(config, sources_.ports); rc < 0) return rc;
    load_limits(config.settings, limits_);
    socket_tuning_.silent_peer = config.settings.duration(SettingId::silent_peer_timeout);
    held_.early.set_limits(limits_.early);
    held_.grants.set_limits(limits_.grants);
    acceptor_.set_limits(limits_.pending_per_source, limits_.setup_timeout);
    support::keys::SharedKey key;
    if (int rc = support::keys::method_key(config.key, config.settings, key); rc < 0) return rc;
    keys_.use(std::move(key));
    if (int rc = keys_.load_encryption(config.settings); rc < 0) return rc;
    same_node_ = config.same_node;
    if (keys_.keyed())
        BMI_LOG(tcp,
                "tcp: a security key is in force; only peers that prove it get in; "
                "encryption %s (ciphers offered 0x%x)",
                config.settings.shown(support::SettingId::encryption).c_str(),
                static_cast<unsigned>(keys_.cipher_offer()));
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return support::bmi_error_from_errno(errno);
    if (int rc = timers_.open(); rc != 0) return rc;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = timer_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timers_.fd(), &ev) < 0)
        return support::bmi_error_from_errno(errno);
    if (int rc = listeners_.start(config, epoll_fd_); rc < 0) return rc;
    if (!listeners_.empty()) acceptor_.keep_reserve();  // to shed a connection when the table fills
    return 0;
}

namespace {
// A parsed and resolved address, made before the method lock is taken.
struct ResolvedAddress final : LookupHint {
    ParsedAddress parsed;
    SocketAddress target;
};
}  // namespace

int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out) {
    auto resolved = std::make_unique<ResolvedAddress>();
    auto parsed = parse_tcp_address(address);
    if (!parsed) return -BMI_EINVAL;
    resolved->parsed = std::move(*parsed);
    if (int rc = resolve(resolved->parsed.host, resolved->parsed.port, resolved->target); rc < 0)
        return rc;
    out = std::move(resolved);
    return 0;
}

int TcpMethod::lookup(std::string_view address, std::shared_ptr<Peer>& out) {
    std::unique_ptr<LookupHint> hint;
    if (int rc = prepare_lookup(address, hint); rc < 0) return rc;
    return lookup_prepared(address, *hint, out);
}

int TcpMethod::lookup_prepared(std::string_view, const LookupHint& hint,
                               std::shared_ptr<Peer>& out) {
    const auto& resolved = static_cast<const ResolvedAddress&>(hint);
    if (auto known = peers_.named(resolved.parsed.canonical)) {
        // A proven peer that reached us first and announced this name: once its connection is
        // gone it can be called back where the name resolves.
        if (known->target.empty()) known->target = resolved.target;
        out = known;
        return 0;
    }
    const std::optional<std::size_t> plane = listeners_.plane_for(resolved.target);
    if (!plane) {
        BMI_LOG(tcp, "tcp: %s is on none of this instance's allocated planes",
                resolved.parsed.canonical.c_str());
        return -BMI_ENETUNREACH;
    }
    auto peer = std::make_shared<TcpPeer>();
    peer->plane = *plane;
    peer->target = resolved.target;
    peer->canonical = resolved.parsed.canonical;
    peer->remote = peer->target;
    peers_.add(peer);
    out = peer;
    return 0;
}

int TcpMethod::post(Operation& op) {
    if (op.total_size < 0 || (op.segment_count > 0 && op.segments == nullptr)) return -BMI_EINVAL;
    auto peer = peers_.adopt(op);
    if (!peer) return -BMI_EINVAL;
    // No legacy peer can send more than 16 MiB, so such a receive would wait forever; OrangeFS
    // refuses it when posted, and so do we once the peer is known to be legacy.
    if (op.kind == OpKind::recv && peer->legacy && op.total_size > legacy_message_limit) {
        BMI_LOG(tcp, "tcp: receive of %lld bytes from legacy peer %s refused: over 16 MiB",
                static_cast<long long>(op.total_size), describe_peer(*peer).c_str());
        return -BMI_EINVAL;
    }
    op.method_state = 0;  // whatever a recycled op carried from its last method
    slots(op) = OpSlots{};
    place(op, Place::posting);
    completions_.begin_post(op);
    int rc = completions_.end_post(op.kind == OpKind::recv ? post_recv(op) : post_send(op));
    if (rc < 0) unplace(op);  // a no-op if the op finished (finish() cleared it)
    return rc;
}

int TcpMethod::post_send(Operation& op) {
    auto peer = peers_.adopt(op);
    if (started_send_)
        if (const auto adopted = adopt_started(op)) return *adopted;
    if (op.kind == OpKind::send_unexpected && op.total_size > unexpected_limit_)
        return -BMI_EMSGSIZE;
    if (peer->legacy && op.total_size > legacy_message_limit) return -BMI_EMSGSIZE;
    if (op.total_size > max_message_size()) return -BMI_EMSGSIZE;
    int error = 0;
    Connection* c = connection_for_send(peer, error);
    if (c == nullptr) return error;
    if (op.kind == OpKind::send_unexpected &&
        unexpected_fit(*c, op.total_size) == UnexpectedFit::too_large)
        return -BMI_EMSGSIZE;
    op.transferred = 0;
    op.actual_size = 0;
    slots(op).connection = c;
    const bool idle = c->state == ConnState::established && !c->has_output();
    c->writer.small_queue.push_back(op);
    place(op, Place::send_queued);
    // An idle connection gets a direct write, so a lone small send usually completes inside
    // post(). A second small send before the next progress call waits for that call instead
    // (EPOLLOUT brings it): a burst of sends then leaves in one sendmsg, not one system call
    // each. A large one is a sendmsg of its own either way, and waiting would only make the
    // thread asleep in the wait point (a server's, while its I/O thread posts) wake to write it.
    const bool coalesces = op.total_size < burst_message_limit;
    if (idle && (!coalesces || c->writer.direct_write_epoch != progress_epoch_)) {
        c->writer.direct_write_epoch = progress_epoch_;
        flush(*c);
    } else {
        update_interest(*c);
    }
    return 0;
}

void TcpMethod::finish(Operation& op, int error) {
    if (!unplace(op)) return;
    if (&op == cancel_op_) error = -BMI_ECANCEL;
    slots(op).connection = nullptr;
    if (error < 0)
        BMI_LOG(tcp, "tcp: op %lld failed: %s", static_cast<long long>(op.id),
                support::error_name(error));
    completions_.complete(op, error);
}

void TcpMethod::fail_posted_recvs(TcpPeer& peer, int error) {
    kit::fail_posted_recvs(peer, error, [this](Operation& op, int e) { finish(op, e); });
}

void TcpMethod::cancel(Operation& op) {
    if (op.method_state == 0) return;
    Connection* c = slots(op).connection;
    switch (static_cast<Place>(op.method_state)) {
        case Place::posting:
            return;
        case Place::send_queued:
            c->writer.small_queue.erase(c->writer.small_queue.iterator_to(op));
            finish(op, -BMI_ECANCEL);
            return;
        case Place::recv_posted: {
            auto& peer = *static_cast<TcpPeer*>(op.peer);
            peer.posted_recvs.erase(op);
            finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::send_writing: {
            // Unwritten and the op's first frame: nothing of it is on the wire yet.
            auto frame = std::find_if(c->writer.out.begin(), c->writer.out.end(),
                                      [&](const OutFrame& f) { return f.op == &op; });
            if (frame != c->writer.out.end() && frame->done == 0 &&
                frame->kind != OutKind::data_chunk) {
                // A grant it would have used stays the peer's gift to the next large send.
                if (frame->grant.cookie != 0) c->grants_held.push_back(frame->grant);
                c->writer.out.erase(frame);
                finish(op, -BMI_ECANCEL);
                update_interest(*c);
                return;
            }
            break;
        }
        default:
            break;
    }
    // The op moved part of its message: the stream is out of step, so the connection goes.
    BMI_LOG(tcp, "tcp: cancel of a transfer in flight closes connection %llu",
            static_cast<unsigned long long>(c->id));
    cancel_op_ = &op;
    fail_connection(*c, -BMI_ECONNRESET, false);
    cancel_op_ = nullptr;
}

void TcpMethod::forget_peer(Peer& peer) {
    auto& p = static_cast<TcpPeer&>(peer);
    [[maybe_unused]] auto keep = peers_.owner(&p);
    close_peer(p, -BMI_ECANCEL, false);
    fail_posted_recvs(p, -BMI_ECANCEL);
    drop_arrivals(p);
    peers_.remove(p);
}

std::string TcpMethod::describe_peer(const Peer& peer) const {
    const auto& p = static_cast<const TcpPeer&>(peer);
    if (!p.canonical.empty()) return p.canonical;
    return describe(p.remote.empty() ? p.target : p.remote);
}

std::string TcpMethod::peer_host(const Peer& peer) const {
    const auto& p = static_cast<const TcpPeer&>(peer);
    return ip_text(p.remote.empty() ? p.target : p.remote);
}

int TcpMethod::query_range(const Peer& peer, std::string_view id_string, int netmask) const {
    const auto& p = static_cast<const TcpPeer&>(peer);
    return match_range(p.remote.empty() ? p.target : p.remote, id_string, netmask);
}

int TcpMethod::set_info(Peer* peer, int option, void* arg) {
    switch (option) {
        case BMI_TCP_BUFFER_SEND_SIZE:
        case BMI_TCP_BUFFER_RECEIVE_SIZE: {
            if (arg == nullptr || *static_cast<int*>(arg) < 0) return -BMI_EINVAL;
            int& slot = option == BMI_TCP_BUFFER_SEND_SIZE ? socket_tuning_.send_buffer
                                                           : socket_tuning_.receive_buffer;
            slot = *static_cast<int*>(arg);
            return 0;
        }
        case info_trusted_sources:
            if (arg == nullptr) return -BMI_EINVAL;
            sources_.trusted = *static_cast<const support::keys::TrustedSources*>(arg);
            sources_.ports.follow(*sources_.trusted);
            return 0;
        case BMI_TCP_CLOSE_SOCKET:
            if (peer == nullptr) return -BMI_EINVAL;
            close_peer(static_cast<TcpPeer&>(*peer), -BMI_ECONNRESET, true);
            fail_posted_recvs(static_cast<TcpPeer&>(*peer), -BMI_ECONNRESET);
            return 0;
        default:
            return -BMI_ENOSYS;
    }
}

int TcpMethod::get_info(Peer* peer, int option, void* arg) {
    if (arg == nullptr) return -BMI_EINVAL;
    switch (option) {
        case BMI_GET_UNEXP_SIZE: {
            // Only a peer that stated its limit has one of its own.
            const Connection* c = peer != nullptr ? static_cast<TcpPeer*>(peer)->send_connection
                                                  : nullptr;
            if (c == nullptr || c->peer_unexpected_limit == 0) return -BMI_ENOSYS;
            *static_cast<bmi_size_t*>(arg) = std::min(unexpected_limit_, c->peer_unexpected_limit);
            return 0;
        }
        case BMI_CHECK_MAXSIZE:
            // Only a peer known to be legacy has a limit of its own: OrangeFS's 16 MiB.
            if (peer == nullptr || !static_cast<TcpPeer*>(peer)->legacy) return -BMI_ENOSYS;
            *static_cast<bmi_size_t*>(arg) = legacy_message_limit;
            return 0;
        case BMI_TCP_BUFFER_SEND_SIZE:
            *static_cast<int*>(arg) = socket_tuning_.send_buffer;
            return 0;
        case BMI_TCP_BUFFER_RECEIVE_SIZE:
            *static_cast<int*>(arg) = socket_tuning_.receive_buffer;
            return 0;
        case BMI_TCP_CHECK_UNEXPECTED: {
            // Unexpected data waits in a socket when a header is parked for memory, or when
            // bytes sit unread on a connection (their mode is unknown until read; report them).
            int waiting = 0;
            for (auto& [id, c] : connections_) {
                if (c->closed) continue;
                if (c->reader.phase == ReadPhase::wait_unexpected) waiting = 1;
                if (c->state != ConnState::connecting && bytes_unread(c->fd)) waiting = 1;
            }
            *static_cast<int*>(arg) = waiting;
            return 0;
        }
        case info_listen_port:
            // The first listener's: with several planes, the one a single answer can name.
            if (listeners_.empty()) return -BMI_ENOSYS;
            *static_cast<int*>(arg) = port_of(local_address(listeners_.at(0).fd));
            return 0;
        case BMI_UNEXPECTED_QUOTA_USE: {
            // The control layer filled in bytes and limit; add the peers held back here.
            std::set<const Peer*> blocked;
            for (auto& [id, c] : connections_)
                if (!c->closed && c->reader.phase == ReadPhase::wait_unexpected && c->peer)
                    blocked.insert(c->peer.get());
            static_cast<BMI_unexpected_quota_use*>(arg)->blocked_peers +=
                static_cast<int>(blocked.size());
            return 0;
        }
        default:
            return -BMI_ENOSYS;
    }
}

}  // namespace bmi::method::tcp
