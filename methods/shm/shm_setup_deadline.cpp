// SPDX-License-Identifier: LGPL-2.1-or-later
// No connection setup waits on its peer without a deadline. From the first connect (initiator)
// or the accept (acceptor) until the connection is open, BMI_SHM_SETUP_TIMEOUT_MS bounds it:
// - an initiator whose listener queued the connect but never accepts it (a stopped or hung
//   server), or accepts it and never replies to the hello, would otherwise hold its large
//   sends and the receives posted for the peer until the socket closes, which may be never;
// - an acceptor whose client never sends its hello, or (keyed) never its proof, would hold a
//   socket, and maybe the client's segment and doorbell, for as long as the client likes.
// At the deadline the connection closes with -BMI_ETIMEDOUT, as for a backlog that never
// drains (shm_connect_retry.cpp): its operations and the receives posted for that peer fail,
// everything it held is released, and the next post to the peer connects afresh.
//
// The kit's deadline engine (kit::Deadlines, whose timerfd is in our epoll set) keeps each
// connection's setup deadline and, while the backlog is full, its next connect retry, so the
// deadline passes in a test() or testcontext() that sleeps with nothing else going on.
#include "methods/shm/shm_setup.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

void ShmSetup::watch_setup(Connection& conn) {
    timers_.schedule({conn.id, kit::DeadlineKind::setup}, conn.setup_deadline);
    if (conn.state == ConnState::backlog_full)
        timers_.schedule({conn.id, kit::DeadlineKind::connect_retry}, conn.retry_at);
}

void ShmSetup::mark_open(Connection& conn) {
    conn.state = ConnState::open;
    acceptor_.release(conn.id);  // through its handshake
    // Left in, it would wake us once for nothing.
    timers_.cancel({conn.id, kit::DeadlineKind::setup});
}

void ShmSetup::on_setup_step(Connection& conn, kit::DeadlineKind kind) {
    const bool backlog_full = conn.state == ConnState::backlog_full;
    if (kind == kit::DeadlineKind::connect_retry && !backlog_full) return;  // through since
    // At the deadline a connection still waiting on the backlog has its last try, which
    // fails with -BMI_ETIMEDOUT if the backlog is still full.
    int rc = backlog_full ? retry_connect(conn) : expire_setup(conn);
    if (rc != 0) {
        host_.close_connection(conn, rc);
        return;
    }
    if (conn.state == ConnState::backlog_full)
        timers_.schedule({conn.id, kit::DeadlineKind::connect_retry}, conn.retry_at);
    // Through the backlog at the deadline itself: the handshake has no time left, and its
    // deadline, already past, comes again at once.
    else if (kind == kit::DeadlineKind::setup && conn.state != ConnState::open)
        timers_.schedule({conn.id, kit::DeadlineKind::setup}, conn.setup_deadline);
}

int ShmSetup::expire_setup(Connection& conn) {
    // A process that did not progress for a while finds the timer and the peer's answer ready
    // in the same wake-up, in either order: the answer counts if it came in time to be read.
    if (conn.state != ConnState::connecting)
        if (int rc = advance_handshake(conn); rc != 0 || conn.state == ConnState::open) return rc;
    const auto ms = static_cast<long long>(options_.setup_timeout.count());
    if (conn.state == ConnState::await_ticket)
        BMI_LOG(error,
                "shm: shm://%s: connection %llu still waited for a new same-node ticket after "
                "%lld ms (BMI_SHM_SETUP_TIMEOUT_MS); its operations fail",
                conn.peer->name.c_str(), static_cast<unsigned long long>(conn.id), ms);
    else if (conn.initiator)
        BMI_LOG(error,
                "shm: shm://%s: connection %llu did not finish its handshake within "
                "%lld ms (BMI_SHM_SETUP_TIMEOUT_MS): the listener does not answer; "
                "its operations fail",
                conn.peer->name.c_str(), static_cast<unsigned long long>(conn.id), ms);
    else
        BMI_LOG(error,
                "shm: connection %llu from pid %d did not finish its handshake within "
                "%lld ms (BMI_SHM_SETUP_TIMEOUT_MS); closed",
                static_cast<unsigned long long>(conn.id), static_cast<int>(conn.peer_pid), ms);
    return -BMI_ETIMEDOUT;
}

}  // namespace bmi::method::shm
