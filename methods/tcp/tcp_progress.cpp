// SPDX-License-Identifier: LGPL-2.1-or-later
// The event loop: one nonblocking epoll_wait per progress(), then the retries and the stall
// timer that do not come from socket readiness.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

void TcpMethod::progress() {
    graveyard_.clear();
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd_, events, 64, 0);
    for (int i = 0; i < n; ++i) handle_event(events[i].data.u64, events[i].events);
    retry_unexpected();
    check_stalls();
    graveyard_.clear();
}

void TcpMethod::handle_event(std::uint64_t id, std::uint32_t events) {
    if (id == listener_id) {
        accept_all();
        return;
    }
    if (id == timer_id) {
        std::uint64_t expirations = 0;
        (void)read(timer_fd_, &expirations, sizeof expirations);
        timer_deadline_.reset();
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
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) on_readable(*c);
    if (!c->closed && (events & EPOLLOUT) != 0) flush(*c);
}

void TcpMethod::retry_unexpected() {
    std::vector<Connection*> waiting;
    for (auto& [id, c] : connections_)
        if (c->phase == ReadPhase::wait_unexpected) waiting.push_back(c.get());
    for (Connection* c : waiting) {
        if (c->closed || !try_alloc_unexpected(*c)) continue;
        on_readable(*c);
    }
}

void TcpMethod::check_stalls() {
    using Clock = std::chrono::steady_clock;
    const auto now = Clock::now();
    std::optional<Clock::time_point> earliest;
    std::vector<Connection*> expired;
    for (auto& [id, c] : connections_) {
        if (!c->partial()) continue;
        const auto deadline = c->last_read + stall_timeout_;
        if (deadline <= now)
            expired.push_back(c.get());
        else if (!earliest || deadline < *earliest)
            earliest = deadline;
    }
    for (Connection* c : expired) {
        BMI_LOG(tcp, "tcp: %s stalled mid-frame; closing", describe(c->remote).c_str());
        fail_connection(*c, -BMI_ETIMEDOUT, true);
    }
    // Re-arm only for an earlier deadline: a timer that fires early just re-arms itself here,
    // which is cheaper than a timerfd_settime on every call while data flows.
    if (!earliest || (timer_deadline_ && *timer_deadline_ <= *earliest)) return;
    const auto wait = std::max<Clock::duration>(*earliest - now, std::chrono::milliseconds(1));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    if (timerfd_settime(timer_fd_, 0, &spec, nullptr) == 0) timer_deadline_ = *earliest;
}

}  // namespace bmi::method::tcp
