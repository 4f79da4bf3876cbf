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

#include <sched.h>
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
}  // namespace

int ShmMethod::start(const std::string& listen_name, bool any_port) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || event_fd_ < 0) return support::bmi_error_from_errno(errno);
    int rc = timers_.open();
    if (rc == 0)
        rc = epoll_set(epoll_fd_, EPOLL_CTL_ADD, event_fd_, EPOLLIN | EPOLLET, eventfd_tag);
    if (rc == 0) rc = epoll_set(epoll_fd_, EPOLL_CTL_ADD, timers_.fd(), EPOLLIN, timer_tag);
    if (rc == 0) rc = visits_.create();
    setup_.hellos().introduce(event_fd_, visits_.bell_fd());
    if (rc != 0) return rc;
    return setup_.start(listen_name, any_port, epoll_fd_);
}

void ShmMethod::wake_self() {
    std::uint64_t one = 1;
    ssize_t ignored = write(event_fd_, &one, sizeof one);
    (void)ignored;
}

void ShmMethod::arm_sweep() {
    const bool wanted = !connections_.empty() || setup_.listener_paused();
    if (wanted == sweep_armed_) return;
    sweep_armed_ = wanted;
    if (wanted)
        timers_.schedule(sweep_key, std::chrono::steady_clock::now() + sweep_period);
    else
        timers_.cancel(sweep_key);
}

void ShmMethod::on_deadline(kit::DeadlineKey key) {
    const bool peer_wait = key.kind == kit::DeadlineKind::send ||
                           key.kind == kit::DeadlineKind::stall ||
                           key.kind == kit::DeadlineKind::rendezvous;
    if (kit::Acceptor::owns(key) || (key.kind != kit::DeadlineKind::sweep && !peer_wait)) {
        setup_.on_deadline(key);
        return;
    }
    if (peer_wait) {
        // A live peer's waits (shm_peer_deadlines.cpp).
        if (Connection* conn = find_connection(key.id); conn != nullptr)
            on_peer_deadline(*conn, key, std::chrono::steady_clock::now());
        return;
    }
    sweep_due_ = true;
    if (sweep_armed_) timers_.schedule(sweep_key, std::chrono::steady_clock::now() + sweep_period);
}

Connection* ShmMethod::find_connection(std::uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
}

// Traffic makes the next spin longer (support/spin/adaptive_spin.hpp).
void ShmMethod::progress() {
    handle_events();
    if (poll_pass()) spins_.reward();
}

void ShmMethod::progress_events(std::span<const epoll_event> ready) {
    dispatch_events(ready);
    if (poll_pass()) spins_.reward();
}

void ShmMethod::progress_without_events() {
    if (poll_pass()) spins_.reward();
}

bool ShmMethod::accept_wake_fd(int fd, std::uint64_t tag) {
    // Our own tags (listener, eventfd, timers, connections counting up from 4) stay far below
    // 2^63.
    return support::add_wake_fd(epoll_fd_, fd, tag);
}

bool ShmMethod::before_sleep() {
    if (poll_pass()) {
        spins_.reward();
        return true;
    }
    const int cpu = sched_getcpu();
    if (cpu >= 0) visits_.note_waiting_cpu(cpu);
    // Spin only while operations wait: an idle instance sleeps at once. Each round only looks
    // (the doorbell's summary words and the busy connections), so a message is noticed within
    // a few nanoseconds.
    if (ops_.pending() > 0) {
        // With the spin configured off there is nothing to leave out (and nothing to count).
        if (options_.spin_us > 0 && spin_is_futile(cpu))
            ++futile_spins_;
        else if ((ops_.moving() > 0 ? spins_.transfer : spins_.short_wait).run([this] {
                     return visits_.anything_to_do() && poll_pass();
                 }))
            return true;
    }
    return visits_.sleep();
}

bool ShmMethod::spin_is_futile(int cpu) {
    if (last_announced_ == 0) return false;
    const Connection* conn = find_connection(last_announced_);
    return conn != nullptr && conn->peer_waits_on(cpu);
}

void ShmMethod::after_wake() { visits_.disarm(); }

bool ShmMethod::poll_pass() {
    visits_.begin_pass();
    if (sweep_due_) {
        sweep_due_ = false;
        setup_.resume_listener();
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
            if (int rc = setup_.receive_reply(*conn); rc != 0) {
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
        if (tag == ShmSetup::listener_tag) {
            // A few at a time: a flood of connects must not starve the rings.
            setup_.accept();
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

void ShmMethod::on_socket_event(Connection& conn, std::uint32_t events) {
    if (conn.state != ConnState::open) {
        setup_.on_socket_event(conn, events);
        return;
    }
    // After the hello the socket carries only shared-buffer offers and withdrawals.
    int rc = buffers_.read_socket(conn);
    if (rc == 0) return;
    // Gone (end of stream), or reset: a Unix socket closed with our reply still unread reads
    // as ECONNRESET. Either way what the peer published is valid and may never have rung (an
    // initiator that left before it read our reply knew no doorbell).
    take_last_messages(conn);
    close_connection(conn, rc > 0 ? -BMI_ECONNRESET : rc);
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
    setup_.release(conn.id);
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
