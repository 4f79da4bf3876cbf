// SPDX-License-Identifier: LGPL-2.1-or-later
// The Method interface of shm: creation, posting, cancel, peers and addresses.
#include "methods/shm/shm_method.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_copy.hpp"
#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::method::shm {

int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out) {
    std::string name;
    bool any_port = false;
    if (!config.listen_address.empty()) {
        auto parts = support::split_scheme(config.listen_address);
        if (!parts || parts->scheme != "shm" || !valid_name(parts->rest)) return -BMI_EINVAL;
        name = std::string(parts->rest);
        // "NAME:0" asks for a free port; so does a portless name in the standalone dialect,
        // where a listen address without a port gets one on every method (Mercury's way).
        const int port = name_port(name);
        if (port == 0) name.resize(name.rfind(':'));
        any_port = port == 0 || (port < 0 && config.dialect == ApiDialect::standalone);
    }
    Options options;
    int rc = load_options(config.settings, config.unexpected_limit, options);
    if (rc != 0) return rc;
    auto method = std::make_unique<ShmMethod>(sink, options);
    support::keys::SharedKey key;
    rc = support::keys::method_key(config.key, config.settings, key);
    if (rc != 0) return rc;
    method->use_key(std::move(key));
    rc = method->start(name, any_port);
    if (rc == 0 && config.same_node) rc = method->serve_same_node(config.same_node);
    if (rc != 0) return rc;
    out = std::move(method);
    return 0;
}

ShmMethod::ShmMethod(Sink& sink, const Options& options)
    : sink_(sink),
      early_(options.budgets.early),
      spins_(options.spin_us, options.transfer_spin_us),
      options_(options) {
    // Yama (ptrace_scope 1) only lets ancestors read our memory; peers are not our ancestors.
    // Harmless where Yama is absent (the call then fails with EINVAL and changes nothing).
    if (options.single_copy) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    BMI_LOG(shm, "large messages use %s; ring %u x %u bytes, eager limit %lld",
            options.single_copy ? "single copy (process_vm_readv)" : "two copies (forced)",
            options_.slot_count, options_.slot_size, static_cast<long long>(options_.eager_limit));
}

const char* taken_path_name(TakenPath path) {
    constexpr const char* names[taken_paths] = {"shared", "split", "single", "stream",
                                                "shared-single"};
    auto index = static_cast<std::size_t>(path);
    return index < taken_paths ? names[index] : "?";
}

// One line, so a tool reading stderr finds it whole: the counters, then for each size class
// that had large receives, its lower bound in bytes and the count per path.
void ShmMethod::print_stats() const {
    std::string line = "shm stats: futile spins ";
    line += std::to_string(futile_spins_);
    line += "; large receives by size:";
    const auto& taken = copies_.taken();
    const char* separator = " ";
    for (std::size_t k = 1; k < taken.size(); ++k) {
        std::uint64_t total = 0;
        for (std::uint64_t n : taken[k]) total += n;
        if (total == 0) continue;
        line += separator;
        line += std::to_string(std::uint64_t{1} << (k - 1));
        for (std::size_t p = 0; p < taken_paths; ++p) {
            if (taken[k][p] == 0) continue;
            line += ' ';
            line += taken_path_name(static_cast<TakenPath>(p));
            line += ' ';
            line += std::to_string(taken[k][p]);
        }
        separator = ", ";
    }
    if (*separator == ' ') line += " none";
    std::fprintf(stderr, "%s\n", line.c_str());
}

ShmMethod::~ShmMethod() {
    if (options_.print_stats) print_stats();
    // The control layer cancelled every operation already; only kernel objects remain, and
    // senders that may still write chunks of a split receive into its buffer: wait for them.
    for (auto& [id, conn] : connections_) {
        for (auto& split : conn->splits) copies_.wait_for_sender(*conn, split);
        if (conn->peer) conn->peer->connection = 0;
        if (conn->fd >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
    }
    visits_.clear();
    connections_.clear();
    peers_.drop_arrivals();
    if (event_fd_ >= 0) close(event_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
}

std::string ShmMethod::listen_address() const {
    const std::string& name = setup_.hellos().listen_name();
    // A same-node listener is for ticket holders only: it is nobody's address to look up.
    if (name.empty() || setup_.hellos().tickets_only()) return {};
    return "shm://" + name;
}

int ShmMethod::set_info(Peer*, int option, void* arg) {
    if (option == info_same_node_renewed) {
        setup_.ticket_renewed(*static_cast<const kit::SameNodeRoute*>(arg));
        return 0;
    }
    if (option != info_serve_same_node) return -BMI_ENOSYS;
    if (!setup_.hellos().listen_name().empty()) return -BMI_EADDRINUSE;
    return serve_same_node(*static_cast<std::shared_ptr<kit::SameNodeTickets>*>(arg));
}

int reserve_same_node(std::string_view name, int& fd) {
    if (!valid_name(name)) return -BMI_EINVAL;
    return listen_on(name, fd);
}

int ShmMethod::get_info(Peer* peer, int option, void* arg) {
    if (option == BMI_GET_UNEXP_SIZE && peer != nullptr && arg != nullptr) {
        // Only a peer whose hello or reply is in has a limit of its own.
        const auto& shm_peer = static_cast<const ShmPeer&>(*peer);
        const Connection* conn = shm_peer.connection != 0 ? find_connection(shm_peer.connection)
                                                          : nullptr;
        if (conn == nullptr || conn->peer_unexpected_limit == 0) return -BMI_ENOSYS;
        *static_cast<bmi_size_t*>(arg) =
            std::min(options_.unexpected_limit, conn->peer_unexpected_limit);
        return 0;
    }
    if (option == get_stats_option && arg != nullptr) {
        auto& stats = *static_cast<Stats*>(arg);
        stats.futile_spins = futile_spins_;
        stats.large_receives = copies_.taken();
        return 0;
    }
    if (option != info_listen_port) return -BMI_ENOSYS;
    const int port = name_port(setup_.hellos().listen_name());
    if (port < 0) return -BMI_ENOSYS;
    *static_cast<int*>(arg) = port;
    return 0;
}

int ShmMethod::lookup(std::string_view address, std::shared_ptr<Peer>& out) {
    auto parts = support::split_scheme(address);
    if (!parts || parts->scheme != "shm" || !valid_name(parts->rest)) return -BMI_EINVAL;
    out = peers_.lookup(std::string(parts->rest));
    return 0;
}

int ShmMethod::lookup_prepared(std::string_view address, const LookupHint& hint,
                               std::shared_ptr<Peer>& out) {
    const auto* same_node = dynamic_cast<const SameNodeLookup*>(&hint);
    if (same_node == nullptr) return lookup(address, out);
    if (int rc = lookup(address, out); rc != 0) return rc;
    auto& peer = static_cast<ShmPeer&>(*out);
    if (!peer.route) peer.route = same_node->route;
    return 0;
}

int ShmMethod::serve_same_node(const std::shared_ptr<kit::SameNodeTickets>& tickets) {
    std::string name;
    const int fd = tickets->take_listener(name);
    if (fd < 0) return -BMI_EINVAL;
    if (int rc = setup_.adopt_listener(fd, name); rc != 0) return rc;
    ShmHellos& hellos = setup_.hellos();
    hellos.admit_tickets_only(tickets);
    tickets->listener_ready(name, hellos.nonce());
    return 0;
}

int ShmMethod::send_now(Peer& base, OpKind kind, bmi_msg_tag_t tag,
                        std::span<const Segment> segments) {
    bmi_size_t size = 0;
    for (const auto& s : segments) size += s.size;
    if (kind == OpKind::send_unexpected && size > options_.unexpected_limit) return -BMI_EMSGSIZE;
    if (kind == OpKind::send && size > options_.eager_limit) return 0;
    // Only into an open ring with nothing queued ahead (messages keep their order); anything
    // else, connecting first included, takes the usual path.
    auto& peer = static_cast<ShmPeer&>(base);
    if (peer.connection == 0) return 0;
    Connection* conn = find_connection(peer.connection);
    if (conn == nullptr || !conn->rings_live() || !conn->send_queue.empty()) return 0;
    if (kind == OpKind::send_unexpected) {
        const Placed fit = unexpected_fit(*conn, size);
        if (fit == Placed::too_large) return -BMI_EMSGSIZE;
        if (fit == Placed::held) return 0;
    } else if (size > ring_payload_limit(conn->tx)) {
        return 0;
    }
    // Class 0: the control layer sends messages of any other class through post().
    if (!place_inline(*conn, kind, tag, 0, segments, size)) return 0;
    announce(*conn);
    return 1;
}

int ShmMethod::post(Operation& op) {
    auto& peer = static_cast<ShmPeer&>(*op.peer);
    if (op.kind == OpKind::recv) {
        if (auto found = peer.arrivals.take(op.tag)) {
            Arrival message = std::move(*found);
            uncharge(peer, message);
            if (message.type == MsgType::eager) {
                if (message.size > op.total_size) {
                    op.actual_size = 0;
                    sink_.complete(op, -BMI_EMSGSIZE);  // an error cannot be an immediate 1
                    return 0;
                }
                Window whole{message.payload.data(), message.payload.size(), nullptr, 0};
                scatter(whole, 0, segments_of(op), 0, message.payload.size());
                op.actual_size = message.size;
                return 1;
            }
            Connection* conn = find_connection(message.connection);
            if (conn == nullptr) return -BMI_ECONNRESET;  // cannot happen: close drops its RTS
            copies_.start_transfer(*conn, op, message.size, message.cookie,
                                   std::move(message.iovs));
            visits_.note_work(*conn);
            wake_self();  // the transfer moves in progress()
            return 0;
        }
        // A receive also opens the connection so the peer can reach a client that has not
        // sent anything yet; failing to connect is not an error for a receive.
        if (peer.connection == 0 && !peer.name.empty()) {
            Connection* ignored = nullptr;
            setup_.ensure_connection(op, ignored);
        }
        peer.posted_recvs.push_back(op);
        ops_.place(op, Place::posted_recv, 0);
        return 0;
    }
    if (op.kind == OpKind::send_unexpected && op.total_size > options_.unexpected_limit)
        return -BMI_EMSGSIZE;
    Connection* conn = nullptr;
    int rc = setup_.ensure_connection(op, conn);
    if (rc != 0) return rc;
    if (conn->send_queue.empty() && conn->rings_live()) {
        Placed placed = place_send(*conn, op);
        visits_.note_work(*conn);  // offering a shared buffer may have broken the socket
        switch (placed) {
            case Placed::completed:
                announce(*conn);
                return 1;
            case Placed::announced:
                announce(*conn);
                return 0;
            case Placed::too_large:
                return -BMI_EMSGSIZE;
            case Placed::no_room:
            case Placed::held:
                break;
        }
    }
    conn->send_queue.push_back(op);
    ops_.place(op, Place::queued_send, conn->id);
    visits_.mark_busy(*conn);
    // Ask the peer to wake us when it frees space; if space appeared meanwhile, progress()
    // must run soon even though nobody will write our eventfd.
    if (conn->tx.block_producer(conn->tx.slot_count() / 2)) wake_self();
    return 0;
}

void ShmMethod::cancel(Operation& op) {
    if (op.method_state == 0) return;  // finished already
    const std::uint64_t connection = ShmOpBook::slots(op).connection;
    switch (static_cast<Place>(op.method_state)) {
        case Place::posted_recv: {
            auto& peer = static_cast<ShmPeer&>(*op.peer);
            peer.posted_recvs.erase(op);
            ops_.finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::queued_send: {
            Connection* conn = find_connection(connection);
            if (conn != nullptr) conn->send_queue.erase(conn->send_queue.iterator_to(op));
            ops_.finish(op, -BMI_ECANCEL);
            return;
        }
        case Place::in_flight: {
            Connection* conn = find_connection(connection);
            // A split receive ends with the sender's cooperation (shm_split.cpp); the connection
            // stays up.
            if (conn != nullptr && copies_.cancel_split(*conn, op)) {
                wake_self();  // it ends in progress()
                return;
            }
            // Otherwise the peer may already hold our addresses or part of the data; only
            // closing the connection guarantees it never touches this buffer again.
            if (conn != nullptr) detach_in_flight(*conn, op);
            ops_.finish(op, -BMI_ECANCEL);
            if (conn != nullptr) {
                BMI_LOG(shm, "cancel of a transfer in flight closes connection %llu",
                        static_cast<unsigned long long>(conn->id));
                close_connection(*conn, -BMI_ECONNRESET);
            }
            return;
        }
    }
}

void ShmMethod::forget_peer(Peer& base) {
    auto& peer = static_cast<ShmPeer&>(base);
    std::vector<std::uint64_t> doomed;
    for (auto& [id, conn] : connections_)
        if (conn->peer.get() == &peer) doomed.push_back(id);
    for (auto id : doomed)
        if (Connection* conn = find_connection(id)) close_connection(*conn, -BMI_ECANCEL);
    ops_.fail_posted_recvs(peer, -BMI_ECANCEL);
    peer.arrivals.for_each([&](const Arrival& message) { uncharge(peer, message); });
    peer.arrivals.clear();
    peers_.forget(peer);
}

bool ShmMethod::peer_gone(const Peer& base) const {
    const auto& peer = static_cast<const ShmPeer&>(base);
    return peer.name.empty() && peer.links == 0;
}

std::string ShmMethod::describe_peer(const Peer& base) const {
    return peer_address(static_cast<const ShmPeer&>(base));
}

int ShmMethod::query_range(const Peer& peer, std::string_view id_string, int) const {
    return id_string == "shm://*" || id_string == describe_peer(peer) ? 1 : 0;
}

void* ShmMethod::mem_alloc(bmi_size_t size) { return buffers_.allocate(size); }

bool ShmMethod::mem_free(void* buffer) { return buffers_.free(buffer); }

// --- operations in flight ---

void ShmMethod::detach_in_flight(Connection& conn, Operation& op) {
    std::erase_if(conn.sends, [&](const auto& entry) { return entry.second == &op; });
    std::erase_if(conn.receives, [&](const auto& entry) { return entry.second.op == &op; });
    std::erase(conn.streams, &op);
    std::erase_if(conn.pulls, [&](const Pull& pull) { return pull.op == &op; });
    copies_.drop_pushes(conn, op);
}

}  // namespace bmi::method::shm
