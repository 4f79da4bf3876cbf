// SPDX-License-Identifier: LGPL-2.1-or-later
// Sleeping in the socket's read instead of epoll_wait, where that is safe (issue 18).
//
// A process that shares its core with its peer sleeps for every message. Woken from
// epoll_wait it then reads, two system calls and an epoll callback on the way; a blocking
// read wakes straight into the data, as a plain socket program does, and a nonblocking read
// that finds nothing followed by a blocking one (what this does) costs almost the same
// (doc/perf/code-figures.md, "Sleeping in the read").
//
// Nothing but the peer's bytes (or the receive timeout) ends such a read, so it is taken
// only where nothing else can need us during it: the control layer allows it in direct
// mode and only while a single thread uses the instance (Waiter::before_sleep_all); here
// it needs exactly one connection, established and readable, nothing queued to write, and
// operations waiting. A server's listening socket is the one thing left unwatched: a new
// client's first frame waits for the read to end, at most the read's time.
//
// For the read the socket leaves the epoll set, so that the kernel wakes only the read;
// until it goes back, progress passes read it by hand.
#include <sys/epoll.h>

#include <cerrno>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

Connection* TcpMethod::sole_waiting_connection() {
    if (polling_.read_wait.count() == 0 || pending_ops_ == 0 || connections_.size() != 1)
        return nullptr;
    if (!held_.waiting_unexpected.empty() || held_.released) return nullptr;
    Connection& c = *connections_.begin()->second;
    if (c.closed || c.state != ConnState::established || c.reader.paused() || c.has_output() ||
        c.buffered_input() || c.reader.read_wait_bound.count() < 0)
        return nullptr;
    return &c;
}

bool TcpMethod::sleep_in_read(std::chrono::steady_clock::time_point now,
                              std::chrono::steady_clock::time_point deadline, bool allowed) {
    Connection* c = allowed ? sole_waiting_connection() : nullptr;
    if (c != nullptr && c->reader.read_wait_bound.count() == 0) {
        c->reader.read_wait_bound = enable_read_wait(c->fd, polling_.read_wait);
        if (c->reader.read_wait_bound.count() <= 0) {
            BMI_LOG(tcp, "tcp: cannot sleep in the read of %s (%lld); it sleeps in epoll",
                    describe(c->remote).c_str(),
                    static_cast<long long>(c->reader.read_wait_bound.count()));
            c->reader.read_wait_bound = std::chrono::microseconds(-1);
            c = nullptr;
        }
    }
    // The kernel counts the timeout in ticks: a caller that wants less than that sleeps in
    // epoll, whose timer is exact.
    if (c != nullptr && deadline - now < c->reader.read_wait_bound) c = nullptr;
    if (c == nullptr || (!c->reader.detached && !detach(*c))) {
        reattach_detached();
        return false;
    }
    polling_.wait_in_read = true;
    const bool moved = poll_connection(*c);
    polling_.wait_in_read = false;
    if (!moved) {
        reattach_detached();  // nothing came in the read's time: the sleep goes to epoll now
        return false;
    }
    // The spin's reward, as after_wake gives it (the control layer's sleep did not run).
    after_wake();
    return true;
}

bool TcpMethod::detach(Connection& c) {
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr) != 0) return false;
    c.reader.detached = true;
    c.events = 0;
    polling_.detached = c.id;
    return true;
}

void TcpMethod::reattach(Connection& c) {
    polling_.detached = 0;
    if (!c.reader.detached || c.closed) return;
    c.reader.detached = false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
        // Nothing would ever tell us about this socket again.
        connection_broken(c, support::bmi_error_from_errno(errno));
        return;
    }
    c.events = EPOLLIN;
    update_interest(c);  // whatever else it wants now (output, a pause)
}

void TcpMethod::reattach_detached() {
    if (polling_.detached == 0) return;
    if (Connection* c = find_connection(polling_.detached); c != nullptr) reattach(*c);
    polling_.detached = 0;
}

bool TcpMethod::read_detached() {
    if (polling_.detached == 0) return false;
    Connection* c = find_connection(polling_.detached);
    if (c == nullptr || c->closed) {
        polling_.detached = 0;
        return false;
    }
    return poll_connection(*c);
}

}  // namespace bmi::method::tcp
