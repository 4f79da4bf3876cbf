// SPDX-License-Identifier: LGPL-2.1-or-later
// No connection setup waits on its peer without a deadline. From the first connect (initiator)
// or the accept (acceptor) until the connection is open, BMI_SHM_CONNECT_TIMEOUT_MS bounds it:
// - an initiator whose listener queued the connect but never accepts it (a stopped or hung
//   server), or accepts it and never replies to the hello, would otherwise hold its large
//   sends and the receives posted for the peer until the socket closes, which may be never;
// - an acceptor whose client never sends its hello, or (keyed) never its proof, would hold a
//   socket, and maybe the client's segment and doorbell, for as long as the client likes.
// At the deadline the connection closes with -BMI_ETIMEDOUT, as for a backlog that never
// drains (shm_connect_retry.cpp): its operations and the receives posted for that peer fail,
// everything it held is released, and the next post to the peer connects afresh.
//
// One timerfd in the epoll set wakes us for the earliest deadline or backlog retry, so the
// deadline passes in a test() or testcontext() that sleeps with nothing else going on.
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

#include "methods/shm/shm_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
using Clock = std::chrono::steady_clock;

// What the timer must wake conn for next: its retry while the backlog is full, else its
// deadline.
Clock::time_point next_step(const Connection& conn) {
    return conn.state == ConnState::backlog_full ? conn.retry_at : conn.setup_deadline;
}
}  // namespace

void ShmMethod::watch_setup(Connection& conn) {
    setting_up_.push_back(conn.id);
    arm_setup_timer(next_step(conn));
}

void ShmMethod::arm_setup_timer(Clock::time_point at) {
    if (at >= setup_timer_at_) return;  // max (nothing to wait for) always returns here
    // Never disarmed by hand: a timer that goes off for a connection already open or closed
    // costs one walk.
    setup_timer_at_ = at;
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(at - Clock::now());
    // A zero it_value would disarm the timer: a step already due fires at once instead.
    long long ns = std::max<long long>(wait.count(), 1);
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    timerfd_settime(setup_timer_fd_, 0, &when, nullptr);
}

void ShmMethod::on_setup_timer() {
    std::uint64_t expirations = 0;
    ssize_t ignored = read(setup_timer_fd_, &expirations, sizeof expirations);
    (void)ignored;
    setup_timer_at_ = Clock::time_point::max();  // it went off: nothing is armed now
    auto now = Clock::now();
    auto next = Clock::time_point::max();
    // Closing a connection may not touch setting_up_ while we walk it: failures wait.
    auto& failed = pass_failures_;
    failed.clear();
    std::erase_if(setting_up_, [&](std::uint64_t id) {
        Connection* conn = find_connection(id);
        if (conn == nullptr || conn->state == ConnState::open) return true;
        int rc = 0;
        if (next_step(*conn) <= now)
            rc = conn->state == ConnState::backlog_full ? retry_connect(*conn)
                                                        : expire_setup(*conn);
        if (rc != 0) {
            failed.emplace_back(id, rc);
            return true;
        }
        if (conn->state == ConnState::open) return true;
        next = std::min(next, next_step(*conn));
        return false;
    });
    for (auto [id, rc] : failed)
        if (Connection* conn = find_connection(id)) close_connection(*conn, rc);
    arm_setup_timer(next);
}

int ShmMethod::expire_setup(Connection& conn) {
    // A process that did not progress for a while finds the timer and the peer's answer ready
    // in the same wake-up, in either order: the answer counts if it came in time to be read.
    if (conn.state != ConnState::connecting)
        if (int rc = advance_handshake(conn); rc != 0 || conn.state == ConnState::open)
            return rc;
    const auto ms = static_cast<long long>(options_.connect_timeout.count());
    if (conn.initiator)
        BMI_LOG(error, "shm: shm://%s: connection %llu did not finish its handshake within "
                       "%lld ms (BMI_SHM_CONNECT_TIMEOUT_MS): the listener does not answer; "
                       "its operations fail",
                conn.peer->name.c_str(), static_cast<unsigned long long>(conn.id), ms);
    else
        BMI_LOG(error, "shm: connection %llu from pid %d did not finish its handshake within "
                       "%lld ms (BMI_SHM_CONNECT_TIMEOUT_MS); closed",
                static_cast<unsigned long long>(conn.id), static_cast<int>(conn.peer_pid), ms);
    return -BMI_ETIMEDOUT;
}

}  // namespace bmi::method::shm
