// SPDX-License-Identifier: LGPL-2.1-or-later
// Starting the connect of an initiator, and starting it again while the listener's backlog is
// full.
//
// A nonblocking connect() on a Unix stream socket never waits for the listener: it either
// queues on the listener at once or, when the backlog (128) is full, fails with EAGAIN. That
// EAGAIN is not "in progress" as it would be on TCP: the kernel started nothing and nothing
// will complete it. 1,000 clients starting at once against one server (a job start on one
// node) meet it, so the connection waits in ConnState::backlog_full without a socket, tries
// again after a pause that starts at 1 ms and doubles up to 64 ms, and gives up with
// -BMI_ETIMEDOUT at the connection's setup deadline (BMI_SHM_SETUP_TIMEOUT_MS after the
// first try, shm_setup_deadline.cpp, which also schedules these tries). Sends posted
// meanwhile wait in its send queue (the rings are not live: no listener has seen us yet) and
// go out once the connect is through; at the deadline they and the receives posted for the
// peer fail.
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>

#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_setup.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
constexpr std::chrono::milliseconds first_pause{1};
// Long enough that 1,000 waiting clients cost the server little, short enough that a client
// is through soon after the backlog drains.
constexpr std::chrono::milliseconds longest_pause{64};
}  // namespace

int ShmSetup::start_connect(Connection& conn) {
    ConnectStart how = ConnectStart::connected;
    int rc = connect_to(conn.peer->name, conn.fd, how);
    if (rc != 0) return rc;
    if (how == ConnectStart::backlog_full) return wait_for_backlog(conn);
    std::uint32_t events = EPOLLIN | EPOLLRDHUP;
    if (how == ConnectStart::in_progress) {
        conn.state = ConnState::connecting;
        events |= EPOLLOUT;
    } else {
        pid_t pid = 0;
        if (!peer_is_same_user(conn.fd, pid)) {
            BMI_LOG(error, "shm: listener '%s' belongs to another user", conn.peer->name.c_str());
            return -BMI_EACCES;
        }
        conn.peer_pid = pid;
        rc = hellos_.send_hello(conn);
        if (rc != 0) return rc;
    }
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = conn.id;
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn.fd, &ev) == 0
               ? 0
               : support::bmi_error_from_errno(errno);
}

int ShmSetup::wait_for_backlog(Connection& conn) {
    auto now = std::chrono::steady_clock::now();
    if (now >= conn.setup_deadline) {
        BMI_LOG(error,
                "shm: shm://%s: its listen backlog stayed full for %lld ms "
                "(BMI_SHM_SETUP_TIMEOUT_MS), its operations fail",
                conn.peer->name.c_str(), static_cast<long long>(options_.setup_timeout.count()));
        return -BMI_ETIMEDOUT;
    }
    if (conn.state != ConnState::backlog_full) {
        conn.state = ConnState::backlog_full;
        conn.retry_pause = first_pause;
        BMI_LOG(shm, "shm://%s: listen backlog full, connecting again for up to %lld ms",
                conn.peer->name.c_str(), static_cast<long long>(options_.setup_timeout.count()));
    }
    // The last try comes at the deadline, not a pause after it.
    conn.retry_at = std::min<std::chrono::steady_clock::time_point>(now + conn.retry_pause,
                                                                    conn.setup_deadline);
    conn.retry_pause = std::min(conn.retry_pause * 2, longest_pause);
    return 0;  // on_setup_step (or watch_setup) schedules the retry for retry_at
}

int ShmSetup::retry_connect(Connection& conn) {
    if (int rc = start_connect(conn); rc != 0) return rc;
    // Through: its queued sends go into the ring now; the reply is awaited.
    if (conn.state != ConnState::backlog_full) visits_.mark_busy(conn);
    return 0;
}

}  // namespace bmi::method::shm
