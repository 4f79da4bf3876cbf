// SPDX-License-Identifier: LGPL-2.1-or-later
// VerbsMethod entry points: creation, lookup, post, cancel, peers, options and memory.
#include "methods/verbs/verbs_method.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "methods/verbs/verbs_method_impl.hpp"
#include "methods/verbs/verbs_settings.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/optional_library/ibverbs.hpp"
#include "support/planes/qos.hpp"

namespace bmi::method::verbs {

namespace {
// "host:port" or the long form "device:ibport/host:port"; the device part only matters for a
// listen address (it picks the local device and port).
struct VerbsAddress {
    std::string device;
    int ib_port = 0;
    support::HostPort bootstrap;
};

std::optional<VerbsAddress> parse_address(std::string_view address) {
    auto parts = support::split_scheme(address);
    if (!parts || parts->scheme != "verbs") return std::nullopt;
    VerbsAddress out;
    std::string_view rest = parts->rest;
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        auto dev = support::parse_host_port(rest.substr(0, slash));
        if (!dev || dev->port == 0 || dev->port > 255) return std::nullopt;
        out.device = dev->host;
        out.ib_port = dev->port;
        rest = rest.substr(slash + 1);
    }
    auto hp = support::parse_host_port(rest);
    if (!hp) return std::nullopt;
    out.bootstrap = std::move(*hp);
    return out;
}

int resolve(const std::string& host, std::uint16_t port, sockaddr_storage& out, socklen_t& len,
            int flags = 0) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | flags;
    addrinfo* result = nullptr;
    const std::string service = std::to_string(port);
    if (getaddrinfo(host.c_str(), service.c_str(), &hints, &result) != 0 || result == nullptr)
        return -BMI_EHOSTUNREACH;
    std::memcpy(&out, result->ai_addr, result->ai_addrlen);
    len = result->ai_addrlen;
    freeaddrinfo(result);
    return 0;
}
}  // namespace

bool device_available(std::string* reason) { return any_device(reason); }

int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out) {
    // libibverbs is opened here, by the first verbs instance, so a process that never asks for
    // verbs never maps it (doc/architecture.md, "What is loaded when").
    std::string why;
    if (support::load_ibverbs(&why) == nullptr) {
        BMI_WARN("bmi_verbs: needs %s, which cannot be loaded (%s)", support::ibverbs_file,
                 why.c_str());
        return -BMI_ENOSYS;
    }
    auto method = std::make_unique<VerbsMethod>(config, sink);
    if (int rc = method->start(config); rc < 0) return rc;
    out = std::move(method);
    return 0;
}

VerbsMethod::VerbsMethod(const Config& config, Sink& sink)
    : sink_(sink),
      unexpected_limit_(config.unexpected_limit > 0
                            ? std::min<bmi_size_t>(config.unexpected_limit, eager_payload)
                            : default_unexpected_limit),
      print_stats_(config.settings.flag(SettingId::stats)) {}

VerbsMethod::~VerbsMethod() {
    if (print_stats_) {
        Stats s;
        get_info(nullptr, get_stats_option, &s);
        std::fprintf(stderr,
                     "verbs stats: reg hits %llu misses %llu; sends %llu (eager %llu, rts %llu, "
                     "credit %llu); reads %llu; fins %llu; parked %llu; credit waits %llu; "
                     "srq buffers %llu; connections %llu; handed wake-ups %llu\n",
                     (unsigned long long)s.reg_hits, (unsigned long long)s.reg_misses,
                     (unsigned long long)s.messages, (unsigned long long)s.eager_sends,
                     (unsigned long long)s.rts_sends, (unsigned long long)s.credit_messages,
                     (unsigned long long)s.read_wrs, (unsigned long long)s.fins,
                     (unsigned long long)s.parked, (unsigned long long)s.credit_waits,
                     (unsigned long long)s.srq_buffers, (unsigned long long)s.connections,
                     (unsigned long long)s.handed_wakeups);
    }
    drain_sends();
    // The control layer reaped every op; what is left is verbs objects, memory and fds.
    for (auto& [id, c] : connections_) {
        c->sends.clear();
        if (c->fd >= 0) close(c->fd);
        if (c->qp) support::ibv().destroy_qp(c->qp);
    }
    for (auto& [raw, peer] : peers_) {
        peer->posted_recvs.clear();
        arrivals_.drop(*peer);
        peer->connection = nullptr;
    }
    for (auto& [cookie, t] : sends_)
        for (auto& h : t->handles) reg_->release(h);
    for (auto& [id, t] : reads_)
        for (auto& h : t->handles) reg_->release(h);
    sends_.clear();
    reads_.clear();
    connections_.clear();
    if (listener_.fd >= 0) close(listener_.fd);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    reg_.reset();  // before the protection domain goes with the device
    device_.reset();
}

// An eager send completes once its payload is in our buffer, so a process may finalize while
// SENDs (the last FIN, a reply) still sit on a send queue; destroying the QP would drop them.
// Give them a bounded moment to leave. Only send-queue counts change here: no op is left.
void VerbsMethod::drain_sends() {
    if (!device_ || device_->cq == nullptr) return;
    auto busy = [&] {
        for (auto& [id, c] : connections_)
            if (c->state == Connection::State::ready && c->sq_free < c->sq_depth) return true;
        return false;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (busy() && std::chrono::steady_clock::now() < deadline) {
        ibv_wc wcs[32];
        const int n = ibv_poll_cq(device_->cq, 32, wcs);
        for (int i = 0; i < n; ++i) {
            Connection* c = queue_pairs_.by_number(wcs[i].qp_num);
            if (c == nullptr || (wcs[i].opcode & IBV_WC_RECV) != 0) continue;
            ++c->sq_free;
            if (wcs[i].status != IBV_WC_SUCCESS) mark_failed(*c);
        }
        if (n <= 0) usleep(1000);
    }
}

int VerbsMethod::start(const Config& config) {
    if (int rc = load_choice(config.settings, choice_); rc < 0) return rc;
    support::keys::SharedKey key;
    if (int rc = support::keys::method_key(config.key, config.settings, key); rc < 0) return rc;
    keys_.use(std::move(key));
    if (int rc = keys_.load_encryption(config.settings); rc < 0) return rc;
    staging_.budget.set_limits({config.settings.number(SettingId::staging_peer_bytes),
                                std::numeric_limits<std::int64_t>::max(),
                                config.settings.number(SettingId::staging_total_bytes)});
    if (keys_.keyed())
        BMI_LOG(verbs,
                "verbs: a security key is in force; only peers that prove it get in; "
                "encryption %s (ciphers offered 0x%x)",
                config.settings.shown(support::SettingId::encryption).c_str(),
                static_cast<unsigned>(keys_.cipher_offer()));
    std::optional<VerbsAddress> listen;
    if (!config.listen_address.empty()) {
        listen = parse_address(config.listen_address);
        // The standalone dialect gives a listen address without a port a free one, as on tcp.
        if (auto parts = support::split_scheme(config.listen_address);
            !listen && config.dialect == ApiDialect::standalone && parts &&
            !support::names_port(parts->rest))
            listen = parse_address(config.listen_address + ":0");
        if (!listen) return -BMI_EINVAL;
        if (!listen->device.empty()) {
            choice_.device = listen->device;
            choice_.port = listen->ib_port;
        }
    }
    if (!config.planes.empty()) {
        // The allocated plane names the device and port; a listen address may agree, not differ.
        const auto& plane = config.planes.front();
        if (listen && !listen->device.empty() &&
            (listen->device != plane.device || listen->ib_port != plane.device_port)) {
            BMI_WARN("verbs: listen address %s names another device than allocation %s (%s)",
                     config.listen_address.c_str(), plane.allocation_id.c_str(),
                     plane.plane.c_str());
            return -BMI_EINVAL;
        }
        choice_.device = plane.device;
        choice_.port = plane.device_port;
        if (plane.dscp) {
            qos_.service_level = support::planes::service_level(*plane.dscp);
            qos_.traffic_class = support::planes::tos_byte(*plane.dscp);
        }
    }
    device_ = std::make_unique<Device>();
    if (int rc = device_->open(choice_); rc < 0) {
        BMI_LOG(error, "verbs: no usable RDMA device: %s", support::error_name(rc));
        return rc;
    }
    reg_ = std::make_unique<RegCache>(device_->pd);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return support::bmi_error_from_errno(errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = cq_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, device_->channel->fd, &ev) < 0)
        return support::bmi_error_from_errno(errno);
    if (int rc = timers_.open(); rc != 0) return rc;
    ev.data.u64 = timer_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timers_.fd(), &ev) < 0)
        return support::bmi_error_from_errno(errno);
    ev.data.u64 = async_id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, device_->context->async_fd, &ev) < 0)
        return support::bmi_error_from_errno(errno);
    timeouts_.setup = config.settings.duration(SettingId::setup_timeout);
    timeouts_.send = config.settings.duration(SettingId::send_timeout);
    timeouts_.rendezvous = config.settings.duration(SettingId::rendezvous_timeout);
    timeouts_.silent_peer = config.settings.duration(SettingId::silent_peer_timeout);
    acceptor_.set_limits(static_cast<std::size_t>(device_->choice.pending_per_source),
                         timeouts_.setup);
    arrivals_.set_limits({config.settings.number(SettingId::early_peer_bytes),
                          EarlyBudget::Limits{}.peer_count,
                          config.settings.number(SettingId::early_total_bytes)});
    if (!listen) return 0;
    return open_listener(listen->bootstrap.host, listen->bootstrap.port);
}

namespace {
// A parsed and resolved address, made before the method lock is taken.
struct ResolvedAddress final : LookupHint {
    std::string canonical;
    support::HostPort bootstrap;
    sockaddr_storage target{};
    socklen_t target_length = 0;
};
}  // namespace

int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out) {
    auto parsed = parse_address(address);
    if (!parsed) return -BMI_EINVAL;
    auto resolved = std::make_unique<ResolvedAddress>();
    resolved->canonical = "verbs://" +
                          support::format_host_port(parsed->bootstrap.host, parsed->bootstrap.port);
    resolved->bootstrap = std::move(parsed->bootstrap);
    if (int rc = resolve(resolved->bootstrap.host, resolved->bootstrap.port, resolved->target,
                         resolved->target_length);
        rc < 0)
        return rc;
    out = std::move(resolved);
    return 0;
}

void VerbsMethod::adopt_announced_name(Connection& c) {
    // The rule every method keeps (PeerNames::may_take): the name a peer proved the key over
    // (it is in the transcript), unless a live peer answers to it already.
    VerbsPeer& peer = *c.peer;
    if (!c.key_handshake.proven()) return;
    const std::string_view announced(c.remote_hello.name,
                                     std::min<std::size_t>(c.remote_hello.name_length, max_name));
    auto parsed = parse_address(announced);
    if (!parsed || parsed->bootstrap.port == 0) return;
    const std::string canonical =
        "verbs://" + support::format_host_port(parsed->bootstrap.host, parsed->bootstrap.port);
    if (!peers_.may_take_name(canonical, true)) return;
    // Only a literal address is resolved here, under the method lock; a lookup of a host name
    // resolves it outside the lock and finds this peer by its name.
    if (resolve(parsed->bootstrap.host, parsed->bootstrap.port, peer.target, peer.target_length,
                AI_NUMERICHOST) != 0)
        peer.target_length = 0;
    peer.canonical = canonical;
    peer.port = parsed->bootstrap.port;
    BMI_LOG(verbs, "verbs: proven peer answers to its announced address %s", canonical.c_str());
}

int VerbsMethod::lookup(std::string_view address, std::shared_ptr<Peer>& out) {
    std::unique_ptr<LookupHint> hint;
    if (int rc = prepare_lookup(address, hint); rc < 0) return rc;
    return lookup_prepared(address, *hint, out);
}

int VerbsMethod::lookup_prepared(std::string_view, const LookupHint& hint,
                                 std::shared_ptr<Peer>& out) {
    const auto& resolved = static_cast<const ResolvedAddress&>(hint);
    if (auto known = peers_.named(resolved.canonical)) {
        out = known;
        return 0;
    }
    auto peer = std::make_shared<VerbsPeer>();
    peer->target = resolved.target;
    peer->target_length = resolved.target_length;
    peer->canonical = resolved.canonical;
    peer->host = resolved.bootstrap.host;
    peer->port = resolved.bootstrap.port;
    peers_.add(peer);
    out = peer;
    return 0;
}

int VerbsMethod::post(Operation& op) {
    if (op.total_size < 0 || (op.segment_count > 0 && op.segments == nullptr)) return -BMI_EINVAL;
    if (!peers_.adopt(op)) return -BMI_EINVAL;
    ops_.begin_post(op);
    int rc = op.kind == OpKind::recv ? post_recv(op) : post_send(op);
    // Whatever the post queued may be sendable now (a receive that matched an RTS has READs
    // to post); the op itself may finish here, which still counts as immediate.
    for (std::uint64_t id : std::exchange(work_.to_pump, {})) {
        if (auto it = connections_.find(id); it != connections_.end()) {
            it->second->pump_scheduled = false;
            pump(*it->second);
        }
    }
    rc = ops_.end_post(rc);
    reap();
    if (rc < 0) op.method_state = 0;  // not pending here (finish() may have cleared it)
    return rc;
}

void VerbsMethod::cancel(Operation& op) {
    if (op.method_state == 0) return;
    switch (static_cast<Place>(op.method_state)) {
        case Place::posting:
            return;
        case Place::send_queued: {
            Connection* c = VerbsOpBook::slots(op).connection;
            c->sends.erase(c->sends.iterator_to(op));
            ops_.finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::recv_posted: {
            static_cast<VerbsPeer*>(op.peer)->posted_recvs.erase(op);
            ops_.finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::send_rts: {
            // The receiver may be reading our memory right now: keep the registration until
            // its FIN, ask it to drop the RTS, and give the op back to the application.
            auto st = sends_.find(VerbsOpBook::slots(op).cookie);
            if (st != sends_.end()) {
                st->second->op = nullptr;
                if (st->second->connection->state == Connection::State::ready)
                    queue_control(*st->second->connection, MsgType::cancel,
                                  VerbsOpBook::slots(op).cookie, FinStatus::cancelled);
            }
            ops_.finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::recv_reading: {
            // READs in flight write into the op's buffer: it completes when they are done.
            RecvTransfer* t = VerbsOpBook::slots(op).transfer;
            if (t->error == 0) t->error = -BMI_ECANCEL;
            // No READ posted yet (the send queue was full): nothing writes into it, finish now.
            if (t->outstanding == 0) read_done(*t);
            return;
        }
    }
}

void VerbsMethod::forget_peer(Peer& peer) {
    auto& p = static_cast<VerbsPeer&>(peer);
    [[maybe_unused]] auto keep = peers_.owner(&p);
    std::vector<Connection*> mine;
    for (auto& [id, c] : connections_)
        if (c->peer.get() == &p) mine.push_back(c.get());
    for (Connection* c : mine) fail_connection(*c, -BMI_ECANCEL);
    ops_.fail_posted_recvs(p, -BMI_ECANCEL);
    arrivals_.drop(p);
    peers_.remove(p);
    reap();
}

bool VerbsMethod::peer_gone(const Peer& peer) const {
    const auto& p = static_cast<const VerbsPeer&>(peer);
    return p.target_length == 0 && p.live_connections == 0;
}

std::string VerbsMethod::describe_peer(const Peer& peer) const {
    return peer_address(static_cast<const VerbsPeer&>(peer));
}

std::string VerbsMethod::peer_host(const Peer& peer) const {
    return static_cast<const VerbsPeer&>(peer).host;
}

int VerbsMethod::query_range(const Peer& peer, std::string_view id_string, int netmask) const {
    const auto& p = static_cast<const VerbsPeer&>(peer);
    auto parts = support::split_scheme(id_string);
    if (!parts) return -BMI_EINVAL;
    std::string_view want = parts->rest;
    if (auto colon = want.rfind(':'); colon != std::string_view::npos && want.find(':') == colon)
        want = want.substr(0, colon);
    if (want == "*") return 1;
    in_addr a{}, b{};
    if (inet_pton(AF_INET, std::string(want).c_str(), &a) != 1 ||
        inet_pton(AF_INET, p.host.c_str(), &b) != 1)
        return want == p.host ? 1 : 0;
    if (netmask <= 0) return ntohl(a.s_addr) == ntohl(b.s_addr) ? 1 : 0;
    const std::uint32_t mask = netmask >= 32 ? ~0u : ~((1u << (32 - netmask)) - 1);
    return (ntohl(a.s_addr) & mask) == (ntohl(b.s_addr) & mask) ? 1 : 0;
}

int VerbsMethod::set_info(Peer* peer, int option, void* arg) {
    if (option != async_event_option) return -BMI_ENOSYS;
    if (peer == nullptr || arg == nullptr) return -BMI_EINVAL;
    on_async_event(*static_cast<const ibv_async_event*>(arg));
    reap();
    return 0;
}

int VerbsMethod::get_info(Peer* peer, int option, void* arg) {
    if (option == BMI_GET_UNEXP_SIZE && peer != nullptr && arg != nullptr) {
        const Connection* c = static_cast<VerbsPeer*>(peer)->connection;
        if (c == nullptr || c->peer_unexpected_limit == 0) return -BMI_ENOSYS;
        *static_cast<bmi_size_t*>(arg) = std::min(unexpected_limit_, c->peer_unexpected_limit);
        return 0;
    }
    if (option == peer_qp_option) {
        if (peer == nullptr) return -BMI_EINVAL;
        Connection* c = static_cast<VerbsPeer*>(peer)->connection;
        if (c == nullptr || c->qp == nullptr) return -BMI_ENOENT;
        *static_cast<void**>(arg) = c->qp;
        return 0;
    }
    if (option == info_listen_port) {
        if (listener_.fd < 0) return -BMI_ENOSYS;
        auto parsed = parse_address(listener_.address);
        if (!parsed) return -BMI_ENOSYS;
        *static_cast<int*>(arg) = parsed->bootstrap.port;
        return 0;
    }
    if (option != get_stats_option) return -BMI_ENOSYS;
    Stats out = stats_;
    out.reg_hits = reg_->hits();
    out.reg_misses = reg_->misses();
    out.srq_buffers = device_->srq_posted;
    out.connections = connections_.size();
    out.peers = static_cast<std::uint64_t>(std::distance(peers_.begin(), peers_.end()));
    out.early_bytes = static_cast<std::uint64_t>(arrivals_.total());
    *static_cast<Stats*>(arg) = out;
    return 0;
}

void* VerbsMethod::mem_alloc(bmi_size_t size) {
    return reg_->allocate(static_cast<std::size_t>(size));
}

bool VerbsMethod::mem_free(void* buffer) { return reg_->free(buffer); }

}  // namespace bmi::method::verbs
