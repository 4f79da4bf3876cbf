// SPDX-License-Identifier: LGPL-2.1-or-later
// The event loop: one nonblocking epoll_wait per progress(), then the retries that do not come
// from socket readiness; and the deadlines, which come from the kit's timerfd in the set.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/epoll/wake_fd.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

void TcpMethod::progress() {
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd_, events, 64, 0);
    progress_events({events, static_cast<std::size_t>(n > 0 ? n : 0)});
    read_detached();  // out of the epoll set since a sleep in its read (tcp_read_wait.cpp)
}

void TcpMethod::progress_without_events() {
    progress_events({});
    read_detached();
}

// What poll_once does for a spin, for a caller that polls: the read of the connection the last
// message came on stands in for the epoll_wait on three passes of four, but not while that
// connection has output waiting for room, which only the whole set's EPOLLOUT moves.
void TcpMethod::progress_polling() {
    const bool read_data_before = std::exchange(polling_.hot_read_data, false);
    if (polling_.detached == 0 && polling_.hot_connection != 0 && !look_due()) {
        if (Connection* c = readable_hot_connection(); c != nullptr && !c->has_output()) {
            // A caller that polls makes its test calls in a row (Mercury's na_bmi: testunexpected,
            // then testcontext): the one right after a read that emptied the socket would only
            // be told EAGAIN, on the way to acting on what that read brought.
            if (read_data_before && c->reader.drained) return;
            polling_.hot_read_data = poll_connection(*c);
            return;
        }
    }
    progress();
}

void TcpMethod::progress_events(std::span<const epoll_event> ready) {
    ++progress_epoch_;
    graveyard_.clear();
    // Unknown ids (the control layer's wake-up fd, closed connections) find nothing.
    for (const auto& event : ready) handle_event(event.data.u64, event.events);
    retry_unexpected();
    if (held_.released) resume_paused();
    graveyard_.clear();
    returner_.maybe_return();
}

bool TcpMethod::before_sleep() {
    // In the direct wait no progress pass runs before the sleep, and no descriptor says that
    // BMI_unexpected_free returned quota: a connection parked on it is retried here, or a
    // server's testunexpected would sleep its whole idle time beside a waiting request.
    if (retry_unexpected()) return true;
    // Only while operations wait for the network: an idle server sleeps at once.
    if (pending_ops_ != 0 && polling_.spin.run([this] { return poll_once(); })) return true;
    polling_.sleep_start = polling_.spin.rewardable() ? std::chrono::steady_clock::now()
                                                      : std::chrono::steady_clock::time_point{};
    return false;
}

void TcpMethod::after_wake() {
    // A sleep that ended soon means traffic flows and polling may catch the next message.
    // "Soon" allows for the wake-up itself on both ends of a round trip: with the bound at the
    // cap alone, one slow phase would leave the budget at 0 for good (doc/perf/code-figures.md).
    if (polling_.sleep_start != std::chrono::steady_clock::time_point{} &&
        std::chrono::steady_clock::now() - polling_.sleep_start < 4 * polling_.spin_cap)
        polling_.spin.reward();
}

// One nonblocking look at our sockets; true if any of them had something.
//
// Most spins wait for the next message on the connection the last one came on (a client's reply,
// the next request of a busy peer). Reading that socket directly finds it with one system call,
// where epoll_wait followed by the read takes two (doc/perf/code-figures.md). Every fourth poll is
// still an epoll_wait, for the other sockets, the timer and the control layer's wake-ups.
bool TcpMethod::poll_once() {
    if (polling_.detached != 0) {
        // The one connection, out of the epoll set (tcp_read_wait.cpp): read it every time,
        // and every fourth time look at the set too.
        if (read_detached()) return true;
        if (!look_due()) return false;
    } else if (polling_.hot_connection != 0 && !look_due()) {
        return poll_hot_connection();
    }
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd_, events, 64, 0);
    int ours = 0;
    for (int i = 0; i < n; ++i) {
        // The control layer's wake-up fd (direct mode) is its business, not progress of ours.
        if (events[i].data.u64 < support::wake_tag_floor) events[ours++] = events[i];
    }
    if (ours == 0) return false;
    progress_events({events, static_cast<std::size_t>(ours)});
    return true;
}

bool TcpMethod::poll_hot_connection() {
    Connection* c = readable_hot_connection();
    return c != nullptr && poll_connection(*c);
}

Connection* TcpMethod::readable_hot_connection() {
    Connection* c = find_connection(polling_.hot_connection);
    if (c == nullptr || c->closed || c->state != ConnState::established || c->reader.paused()) {
        polling_.hot_connection = 0;
        return nullptr;
    }
    return c;
}

bool TcpMethod::poll_connection(Connection& c) {
    const std::uint64_t before = c.reader.reads_with_data;
    // What progress_events does around the events it hands out, for this one socket.
    ++progress_epoch_;
    graveyard_.clear();
    on_readable(c);
    const bool moved = c.reader.reads_with_data != before || c.closed;
    retry_unexpected();
    if (held_.released) resume_paused();
    graveyard_.clear();
    returner_.maybe_return();
    return moved;
}

bool TcpMethod::accept_wake_fd(int fd, std::uint64_t tag) {
    // Our own ids (listener, timer, connections counting up from 16) stay far below 2^63.
    return support::add_wake_fd(epoll_fd_, fd, tag);
}

void TcpMethod::handle_event(std::uint64_t id, std::uint32_t events) {
    if (const auto listener = listeners_.index_of(id)) {
        acceptor_.accept_all(listeners_.at(*listener).fd, *listener);
        return;
    }
    if (id == timer_id) {
        // A handed-over event may be stale: then nothing has expired and nothing is called.
        timers_.expire([this](kit::DeadlineKey key, std::chrono::steady_clock::time_point now) {
            on_deadline(key, now);
        });
        return;
    }
    Connection* c = find_connection(id);
    if (c == nullptr || c->closed) return;
    if (c->state == ConnState::connecting) {
        finish_connect(*c);
        return;
    }
    // ERR and HUP are reported even with EPOLLIN off; left alone they would spin the caller.
    if ((events & (EPOLLERR | EPOLLHUP)) != 0 && (c->events & EPOLLIN) == 0) {
        const int err = socket_error(c->fd);
        connection_broken(*c, err < 0 ? err : -BMI_ECONNRESET);
        return;
    }
    if ((events & EPOLLRDHUP) != 0 && c->reader.paused() && abandoned(*c)) {
        BMI_LOG(tcp,
                "tcp: %s closed while its connection was paused, and nothing can claim "
                "what it left; closing",
                describe(c->remote).c_str());
        connection_broken(*c, -BMI_ECONNRESET);
        return;
    }
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
        polling_.hot_connection = c->id;
        on_readable(*c);
    }
    if (!c->closed && (events & EPOLLOUT) != 0) flush(*c);
}

bool TcpMethod::retry_unexpected() {
    if (held_.waiting_unexpected.empty()) return false;
    // deliver_unexpected() lists a connection again when the quota still has no room.
    const std::vector<std::uint64_t> waiting = std::move(held_.waiting_unexpected);
    held_.waiting_unexpected.clear();
    bool delivered = false;
    for (std::uint64_t id : waiting) {
        Connection* c = find_connection(id);
        if (c == nullptr || c->closed || c->reader.phase != ReadPhase::wait_unexpected) continue;
        if (!deliver_unexpected(*c)) continue;
        delivered = true;
        on_readable(*c);
    }
    return delivered;
}

void TcpMethod::watch_deadlines(Connection& c) {
    if (c.closed) return;
    if (!c.reader.stall_clock.timed && c.partial())
        c.reader.stall_clock.start(timers_, {c.id, kit::DeadlineKind::stall},
                                   c.reader.reads_with_data, limits_.stall_timeout);
    if (!c.writer.send_clock.timed && c.output_waits())
        c.writer.send_clock.start(timers_, {c.id, kit::DeadlineKind::send},
                                  c.writer.writes_with_data, limits_.send_timeout);
}

void TcpMethod::on_deadline(kit::DeadlineKey key, std::chrono::steady_clock::time_point now) {
    if (kit::Acceptor::owns(key)) {
        acceptor_.on_deadline(key, now);
        return;
    }
    Connection* c = find_connection(key.id);
    if (c == nullptr || c->closed) return;
    switch (key.kind) {
        case kit::DeadlineKind::setup:
            if (c->setting_up() || c->dialling()) fail_late_handshake(*c);
            return;
        case kit::DeadlineKind::stall:
            // Owed nothing now: watch_deadlines starts it again. Bytes unread: we were away.
            if (!c->reader.stall_clock.expired_if_owed(
                    c->partial(), [c] { return bytes_unread(c->fd); }, timers_, key,
                    c->reader.reads_with_data, now, limits_.stall_timeout))
                return;
            if (c->setting_up() && c->setup_deadline <= now) {
                fail_late_handshake(*c);
                return;
            }
            BMI_LOG(tcp, "tcp: %s stalled mid-frame; closing", describe(c->remote).c_str());
            fail_connection(*c, -BMI_ETIMEDOUT, true);
            return;
        case kit::DeadlineKind::send:
            // Room in the socket now: the peer read, and we were away.
            if (!c->writer.send_clock.expired_if_owed(
                    c->output_waits(), [c] { return writable_now(c->fd); }, timers_, key,
                    c->writer.writes_with_data, now, limits_.send_timeout))
                return;
            BMI_LOG(tcp, "tcp: %s took none of our bytes in %lld ms; closing",
                    describe(c->remote).c_str(),
                    static_cast<long long>(limits_.send_timeout.count()));
            fail_connection(*c, -BMI_ETIMEDOUT, true);
            return;
        case kit::DeadlineKind::rendezvous:
            fail_unanswered_rts(*c, now);
            return;
        default:
            return;
    }
}

void TcpMethod::fail_late_handshake(Connection& c) {
    BMI_LOG(tcp, "tcp: %s did not finish its handshake in %lld ms; closing",
            describe(c.remote).c_str(), static_cast<long long>(limits_.setup_timeout.count()));
    fail_connection(c, -BMI_ETIMEDOUT, true);
}

void TcpMethod::fail_unanswered_rts(Connection& c, std::chrono::steady_clock::time_point now) {
    const std::vector<std::uint64_t> unanswered =
        kit::take_due(timers_, {c.id, kit::DeadlineKind::rendezvous}, now, c.writer.await_cts,
                      [](Operation* op) { return slots(*op).rts_deadline; });
    for (std::uint64_t cookie : unanswered) {
        Operation* op = c.writer.await_cts.at(cookie);
        // The receiver never cleared or refused the RTS: unpin the buffer. A CTS that still
        // comes names no transfer of ours any more and closes the connection.
        BMI_LOG(tcp, "tcp: %s did not answer an RTS in %lld ms; failing the send",
                describe(c.remote).c_str(),
                static_cast<long long>(limits_.rendezvous_timeout.count()));
        c.writer.await_cts.erase(cookie);
        finish(*op, -BMI_ETIMEDOUT);
    }
}

}  // namespace bmi::method::tcp
