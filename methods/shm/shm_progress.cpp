// SPDX-License-Identifier: LGPL-2.1-or-later
// Sockets, connection life cycle, and the wait / wake-up protocol of the shm method.
//
// Which connections a pass visits: those whose bit of our doorbell a peer rang (it published
// or changed a split counter, shm_doorbell.hpp), the busy ones (work of their own: queued
// sends, copies, a stalled ring, a broken socket; Connection::needs_visit), and, once per
// sweep period, every connection. So a pass costs what the active connections cost, however
// many idle ones we hold, and a lost bit costs at most one sweep period.
//
// Waking: our wait_fd is an epoll set holding the listener, every connection socket, our
// eventfd, the deadline timer (kit::Deadlines) and, when shm is the only method, the control
// layer's wake-up fd.
// Peers write our eventfd only when our doorbell says we sleep or when we said we wait
// for space in a ring they drain (producer_blocked); a busy pair therefore exchanges messages
// with no system call. The doorbell's sleeping flag follows the control layer's sleep protocol
// (methods/method.hpp): before_sleep() polls, spins briefly while operations are pending, and
// only then sets the flag, re-checking the doorbell afterwards (a ring between our last look
// and the flag store is seen by that re-check, one after it sees the flag and writes the
// eventfd); after_wake() clears it. Both cost O(1), not a store per connection. The eventfd
// sits in the set edge-triggered: every write is one wake-up, and nobody needs to read it back,
// which saves a system call per wake-up in pure blocking mode (its counter cannot
// realistically overflow: 2^64 - 2 writes).
// Work we can do without the peer makes before_sleep() report progress, or, when posted while
// another thread may already sleep, makes us write our own eventfd.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "methods/shm/shm_notifier.hpp"
#include "support/epoll/wake_fd.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// The longest a message whose doorbell bit was lost waits. Each sweep reads one stamp per
// connection, so at this period even many idle connections cost little (doc/perf/code-figures.md).
constexpr std::chrono::milliseconds sweep_period{250};
constexpr kit::DeadlineKey sweep_key{0, kit::DeadlineKind::sweep};

int epoll_set(int epoll_fd, int op, int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    return epoll_ctl(epoll_fd, op, fd, &ev) == 0 ? 0 : support::bmi_error_from_errno(errno);
}
}  // namespace

int ShmMethod::start(const std::string& listen_name) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || event_fd_ < 0) return support::bmi_error_from_errno(errno);
    int rc = timers_.open();
    if (rc == 0)
        rc = epoll_set(epoll_fd_, EPOLL_CTL_ADD, event_fd_, EPOLLIN | EPOLLET, eventfd_tag);
    if (rc == 0) rc = epoll_set(epoll_fd_, EPOLL_CTL_ADD, timers_.fd(), EPOLLIN, timer_tag);
    if (rc == 0) rc = visits_.create();
    hellos_.introduce(event_fd_, visits_.bell_fd());
    if (rc != 0 || listen_name.empty()) return rc;
    rc = listen_on(listen_name, listen_fd_);
    if (rc != 0) {
        BMI_LOG(error, "shm: cannot listen on '%s' (%d)", listen_name.c_str(), rc);
        return rc;
    }
    hellos_.listen_as(listen_name);
    acceptor_.keep_reserve();  // to refuse a client when the table fills (shm_descriptors.cpp)
    BMI_LOG(shm, "listening on shm://%s", listen_name.c_str());
    return epoll_set(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, EPOLLIN, listener_tag);
}

void ShmMethod::wake_self() {
    std::uint64_t one = 1;
    ssize_t ignored = write(event_fd_, &one, sizeof one);
    (void)ignored;
}

void ShmMethod::set_listener_interest(bool on) {
    if (epoll_set(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, on ? EPOLLIN : 0u, listener_tag) == 0)
        listener_paused_ = !on;
    arm_sweep();  // a paused listener keeps the sweep running, which resumes it
}

void ShmMethod::arm_sweep() {
    const bool wanted = !connections_.empty() || listener_paused_;
    if (wanted == sweep_armed_) return;
    sweep_armed_ = wanted;
    if (wanted)
        timers_.schedule(sweep_key, std::chrono::steady_clock::now() + sweep_period);
    else
        timers_.cancel(sweep_key);
}

void ShmMethod::on_deadline(kit::DeadlineKey key) {
    if (kit::Acceptor::owns(key)) {
        acceptor_.on_deadline(key, std::chrono::steady_clock::now());
        return;
    }
    if (key.kind == kit::DeadlineKind::sweep) {
        sweep_due_ = true;
        if (sweep_armed_)
            timers_.schedule(sweep_key, std::chrono::steady_clock::now() + sweep_period);
        return;
    }
    Connection* conn = find_connection(key.id);
    if (conn == nullptr) return;  // closed since
    if (key.kind == kit::DeadlineKind::setup || key.kind == kit::DeadlineKind::connect_retry) {
        if (conn->state != ConnState::open) on_setup_step(*conn, key.kind);  // else open since
        return;
    }
    on_peer_deadline(*conn, key, std::chrono::steady_clock::now());
}

Connection* ShmMethod::find_connection(std::uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
}

// Traffic makes the next spin longer (support/spin/adaptive_spin.hpp).
void ShmMethod::progress() {
    handle_events();
    if (poll_pass()) spin_.reward();
}

void ShmMethod::progress_events(std::span<const epoll_event> ready) {
    dispatch_events(ready);
    if (poll_pass()) spin_.reward();
}

bool ShmMethod::accept_wake_fd(int fd, std::uint64_t tag) {
    // Our own tags (listener, eventfd, timers, connections counting up from 4) stay far below
    // 2^63.
    return support::add_wake_fd(epoll_fd_, fd, tag);
}

bool ShmMethod::before_sleep() {
    if (poll_pass()) {
        spin_.reward();
        return true;
    }
    // Spin only while operations wait: an idle instance sleeps at once. Each round only looks
    // (the doorbell's summary words and the busy connections), so a message is noticed within
    // a few nanoseconds.
    if (ops_.pending() > 0 && spin_.run([this] { return visits_.anything_to_do() && poll_pass(); }))
        return true;
    return visits_.sleep();
}

void ShmMethod::after_wake() { visits_.disarm(); }

bool ShmMethod::poll_pass() {
    visits_.begin_pass();
    if (sweep_due_) {
        sweep_due_ = false;
        resume_listener();
        for (auto& [id, conn] : connections_) visits_.queue(*conn);
    }
    bool moved = false;
    // Closing a connection erases it from connections_, so failures are closed after the walk
    // (the lists are members, so the spin loop does not allocate).
    auto& failed = pass_failures_;
    failed.clear();
    for (Connection* conn : visits_.due()) {
        // A process that always finds work in its rings never sleeps in epoll, so the reply
        // that brings the peer's doorbell is read here too: until then our messages ring
        // nothing and the peer finds them only by its sweep.
        if (conn->state == ConnState::await_reply) {
            if (int rc = receive_reply(*conn); rc != 0) {
                failed.emplace_back(conn->id, rc);
                continue;
            }
            visits_.note_work(*conn);
        }
        if (!conn->rings_live()) continue;  // opening it visits it (mark_busy)
        const std::uint64_t consumed = conn->rx.consumed();
        if (int rc = visit(*conn, moved); rc != 0) {
            failed.emplace_back(conn->id, rc);
            continue;
        }
        if (conn->rx.consumed() != consumed) visits_.took_messages(*conn);
        visits_.note_work(*conn);
    }
    for (auto [id, rc] : failed)
        if (Connection* conn = find_connection(id)) close_connection(*conn, rc);
    return moved;
}

int ShmMethod::visit(Connection& conn, bool& moved) {
    // A broken socket closes the connection, but what the peer published before it broke is
    // valid (its sends of it completed): take that first.
    if (conn.socket_error != 0) take_last_messages(conn);
    int rc = conn.socket_error != 0 ? conn.socket_error : receive_messages(conn, moved);
    // Replies first (a HELP lets the sender start copying while we do), then the copying
    // we do ourselves, then whatever that finished (DONE).
    if (rc == 0 && conn.waits_for_room() && flush(conn)) moved = true;
    if (rc == 0 && !conn.pulls.empty()) rc = copies_.advance_pulls(conn, moved);
    if (rc == 0 && !conn.splits.empty()) rc = copies_.advance_splits(conn, moved);
    if (rc == 0 && !conn.pushes.empty()) copies_.advance_pushes(conn, moved);
    if (rc != 0) return rc;
    if (conn.waits_for_room() && flush(conn)) moved = true;
    watch_peer(conn);
    return 0;
}

void ShmMethod::handle_events() {
    epoll_event events[32];
    int n = epoll_wait(epoll_fd_, events, 32, 0);
    dispatch_events({events, static_cast<std::size_t>(n > 0 ? n : 0)});
}

void ShmMethod::dispatch_events(std::span<const epoll_event> ready) {
    for (const auto& event : ready) {
        std::uint64_t tag = event.data.u64;
        if (tag == listener_tag) {
            // A few at a time: a flood of connects must not starve the rings.
            acceptor_.accept_all(listen_fd_, 0, 32);
        } else if (tag == timer_tag) {
            timers_.expire([this](kit::DeadlineKey key, auto) { on_deadline(key); });
        } else if (tag == eventfd_tag) {
            // Edge-triggered: its event was the wake-up, and nothing needs to read it back.
            // Every wake-up of a sleeping ping-pong is this one, so it skips the lookup below.
        } else if (Connection* conn = find_connection(tag)) {
            // The control layer's wake-up fds find no connection and are ignored here.
            on_socket_event(*conn, event.events);
        }
    }
}

std::optional<std::uint64_t> ShmMethod::start_accepted(const kit::AcceptedSocket& socket) {
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
    arm_sweep();
    watch_setup(added);
    return added.id;
}

void ShmMethod::on_socket_event(Connection& conn, std::uint32_t events) {
    int rc = 0;
    switch (conn.state) {
        case ConnState::backlog_full:  // no socket in the epoll set: cannot happen
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
        case ConnState::open: {
            // After the hello the socket carries only shared-buffer offers and withdrawals.
            rc = buffers_.read_socket(conn);
            if (rc == 0) return;
            // Gone (end of stream), or reset: a Unix socket closed with our reply still unread
            // reads as ECONNRESET. Either way what the peer published is valid and may never have
            // rung (an initiator that left before it read our reply knew no doorbell).
            take_last_messages(conn);
            if (rc > 0) rc = -BMI_ECONNRESET;
            break;
        }
    }
    if (rc != 0) close_connection(conn, rc);
}

int ShmMethod::advance_handshake(Connection& conn) {
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

int ShmMethod::ensure_connection(Operation& op, Connection*& out) {
    auto& peer = static_cast<ShmPeer&>(*op.peer);
    if (peer.connection != 0) {
        out = find_connection(peer.connection);
        if (out != nullptr) return 0;
        peer.connection = 0;
    }
    // A peer without a listen name can only be reached over the connection it opened.
    if (peer.name.empty()) return -BMI_ECONNRESET;
    return open_connection(std::static_pointer_cast<ShmPeer>(op.peer_ref), out);
}

int ShmMethod::open_connection(const std::shared_ptr<ShmPeer>& peer, Connection*& out) {
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
        ShmMethod* method;
        Connection* conn;
        ~GiveBack() {
            if (conn != nullptr) method->visits_.give_back_bell_index(*conn);
        }
    } give_back{this, conn.get()};
    conn->tx = conn->segment.ring(0);
    conn->rx = conn->segment.ring(1);
    conn->own_board = conn->segment.board(0);
    conn->peer_board = conn->segment.board(1);
    conn->own_socket_sent = conn->segment.socket_messages(0);
    conn->peer_socket_sent = conn->segment.socket_messages(1);
    // From the first try until the listener's reply, backlog retries included.
    conn->setup_deadline = std::chrono::steady_clock::now() + options_.setup_timeout;
    rc = start_connect(*conn);
    if (rc != 0) return rc;
    peer->connection = conn->id;
    out = conn.get();
    give_back.conn = nullptr;
    BMI_LOG(shm, "connection %llu to shm://%s", static_cast<unsigned long long>(conn->id),
            peer->name.c_str());
    connections_.emplace(conn->id, std::move(conn));
    arm_sweep();
    watch_setup(*out);
    visits_.note_work(*out);  // awaiting the reply
    return 0;
}

int ShmMethod::receive_hello(Connection& conn) {
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
    conn.peer = peer_for_hello(hello, conn.peer_pid);
    if (conn.peer->connection == 0 || find_connection(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    const bool replied = hellos_.send_reply(conn);
    mark_open(conn);
    visits_.mark_busy(conn);  // the initiator may have filled its ring before it knew our doorbell
    if (!replied) {
        // The initiator left before our answer: it may fill its ring before the handshake
        // ends, so sends it completed (an unexpected request, then BMI_DROP_ADDR) wait there.
        take_last_messages(conn);
        return -BMI_ECONNRESET;
    }
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d)",
            static_cast<unsigned long long>(conn.id), describe_peer(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

std::shared_ptr<ShmPeer> ShmMethod::peer_for_hello(const Hello& hello, pid_t pid) {
    const std::string announced(hello.name, hello.name_length);
    // With a key this runs only once the initiator proved it (admit_proven).
    const bool proven = hellos_.keyed();
    if (!named_.may_take(announced, proven)) {
        // A second connection of a proven instance that holds its name is that same peer.
        auto holder = named_.find(announced);
        if (proven && holder && holder->pid == pid && holder->nonce == hello.nonce) return holder;
        return nameless_.find_or_add(pid, hello.nonce);
    }
    auto peer = std::make_shared<ShmPeer>();
    peer->name = announced;
    peer->pid = pid;
    peer->nonce = hello.nonce;
    named_.add(announced, peer);
    return peer;
}

int ShmMethod::admit_proven(Connection& conn) {
    conn.peer = peer_for_hello(conn.hello_received, conn.peer_pid);
    if (conn.peer->connection == 0 || find_connection(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    mark_open(conn);
    visits_.mark_busy(
        conn);  // the initiator may have filled its ring already, and rung for nothing
    wake_self();
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d), key proven",
            static_cast<unsigned long long>(conn.id), describe_peer(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

int ShmMethod::receive_reply(Connection& conn) {
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
    if (int rc = hellos_.check_reply(conn, reply); rc != 0) return rc;
    conn.peer->pid = conn.peer_pid;
    mark_open(conn);
    visits_.mark_busy(conn);  // a keyed acceptor may have rung before our rings were live
    // Whatever we placed before the peer attached went unannounced: announce it once.
    conn.peer_bell.ring(conn.peer_bell_index);
    conn.write_peer_event();
    return 0;
}

void ShmMethod::take_last_messages(Connection& conn) {
    // The peer is gone. What it published before leaving is still valid (its sends of those
    // messages completed), so take it before the connection closes.
    bool moved = false;
    for (std::uint32_t i = 0; i < conn.rx.slot_count() && conn.rx.has_message(); ++i)
        if (receive_messages(conn, moved) != 0 || conn.stalled) break;
}

void ShmMethod::close_connection(Connection& conn, int error) {
    BMI_LOG(shm, "closing connection %llu (%d)", static_cast<unsigned long long>(conn.id), error);
    acceptor_.release(conn.id);
    auto owned = std::move(connections_[conn.id]);
    connections_.erase(conn.id);
    timers_.cancel_all(conn.id);
    arm_sweep();
    visits_.forget(conn);
    buffers_.forget_connection(conn.id);
    if (conn.fd >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn.fd, nullptr);
    while (!conn.send_queue.empty()) {
        Operation& op = conn.send_queue.front();
        conn.send_queue.pop_front();
        ops_.finish(op, error);
    }
    copies_.end_splits(conn, error);  // waits until a live sender stops writing into our buffers
    std::vector<Operation*> victims;
    for (auto& [cookie, op] : conn.sends) victims.push_back(op);
    for (auto& [cookie, receive] : conn.receives) victims.push_back(receive.op);
    for (auto* op : conn.streams) victims.push_back(op);
    for (auto& pull : conn.pulls) victims.push_back(pull.op);
    conn.sends.clear();
    conn.receives.clear();
    conn.streams.clear();
    conn.pulls.clear();
    for (auto* op : victims) ops_.finish(*op, error);
    // This connection no longer counts among its peer's (peer_gone, the successor below).
    const std::shared_ptr<ShmPeer> link = conn.peer.release();
    if (ShmPeer* peer = link.get()) {
        peer->arrivals.remove_if(
            [&](const Arrival& m) { return m.type == MsgType::rts && m.connection == conn.id; },
            [&](const Arrival& m) { uncharge(*peer, m); });
        if (peer->connection == conn.id) {
            peer->connection = 0;
            // Another connection of the same pair (both connected at once) takes over. The
            // walk happens only when there is one: a pair rarely holds two.
            if (peer->links > 0)
                for (auto& [id, other] : connections_)
                    if (other->peer.get() == peer && other->state != ConnState::await_hello)
                        peer->connection = id;
            if (peer->connection == 0) ops_.fail_posted_recvs(*peer, error);
        }
        // The application may hold its address; the control layer drops it when nobody does.
        if (peer->addr() != 0 && peer_gone(*peer)) sink_.peer_gone(*peer);
    }
}

}  // namespace bmi::method::shm
