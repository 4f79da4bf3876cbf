// SPDX-License-Identifier: LGPL-2.1-or-later
// kit::Acceptor (acceptor.hpp): the accept loop, per-source admission with its waiting
// sockets, and shedding when descriptors run out.
#include "methods/kit/acceptor.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace bmi::method::kit {

void SheddingChoice::offer(std::uint64_t ticket, Clock::time_point accepted_at, bool unproven) {
    if (ticket == keep_ || now_ - accepted_at < time_to_speak) return;  // too young to judge
    std::optional<Candidate>& best = unproven ? unproven_ : idle_;
    if (!best || accepted_at < best->at) best = Candidate{ticket, accepted_at};
}

std::optional<std::uint64_t> SheddingChoice::chosen() const {
    if (unproven_) return unproven_->ticket;
    if (idle_) return idle_->ticket;
    return std::nullopt;
}

Acceptor::~Acceptor() {
    for (Waiting& w : waiting_) close(w.socket.fd);
}

void Acceptor::set_limits(std::size_t per_source, std::chrono::milliseconds setup_timeout) {
    admission_.set_limit(per_source);
    setup_timeout_ = setup_timeout;
}

void Acceptor::accept_all(int listen_fd, std::uint64_t listener, std::size_t max) {
    reserve_.keep();  // if it was lost to a full table, while we still can
    for (std::size_t taken = 0; taken < max;) {
        AcceptedSocket socket;
        socket.listener = listener;
        socket.length = sizeof socket.from;
        socket.fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&socket.from), &socket.length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (socket.fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                if (shed(listen_fd)) continue;
                return;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK && support::log_enabled(area_))
                support::log_print(area_, "%s: accept failed: errno %d", method_, errno);
            return;
        }
        ++taken;
        std::optional<std::string> source = host_.source_of(socket);
        if (!source) {
            close(socket.fd);
            continue;
        }
        admit_or_wait(socket, std::move(*source), Clock::now());
    }
}

bool Acceptor::room_for(const std::string& source, Clock::time_point now) {
    if (admission_.has_room(source)) return true;
    const auto oldest = admission_.oldest(source);
    if (!oldest || now - oldest->since < time_to_speak) return false;
    if (support::log_enabled(area_))
        support::log_print(area_,
                           "%s: %s holds %zu unfinished handshakes; closing its oldest "
                           "(connection %llu) for a newcomer",
                           method_, source.c_str(), admission_.limit(),
                           static_cast<unsigned long long>(oldest->ticket));
    host_.close_for_room(oldest->ticket);
    admission_.release(oldest->ticket);  // if its close path did not
    return admission_.has_room(source);
}

std::deque<Acceptor::Waiting>::iterator Acceptor::newest_waiting(const std::string& source) {
    for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it)
        if (it->source == source) return std::prev(it.base());
    return waiting_.end();
}

Acceptor::Clock::time_point Acceptor::next_look(const Waiting& w) const {
    const auto oldest = admission_.oldest(w.source);
    if (!oldest) return w.deadline;  // room: released meanwhile
    return std::min(w.deadline, oldest->since + time_to_speak);
}

void Acceptor::admit_or_wait(const AcceptedSocket& socket, std::string source,
                             Clock::time_point now) {
    if (room_for(source, now)) {
        start(socket, source, now);
        return;
    }
    if (waiting_.size() >= waiting_limit) {
        BMI_WARN("%s: %zu sockets already wait for their source's unfinished handshakes; "
                 "closing a new one from %s (per-source bound %zu)",
                 method_, waiting_.size(), source.c_str(), admission_.limit());
        close(socket.fd);
        return;
    }
    if (support::log_enabled(area_))
        support::log_print(area_,
                           "%s: %s holds %zu unfinished handshakes, all new; its next "
                           "waits",
                           method_, source.c_str(), admission_.limit());
    const std::uint64_t number = next_waiting_++;
    waiting_.push_back({number, socket, std::move(source), now + setup_timeout_});
    timers_.schedule(key_of(number), next_look(waiting_.back()));
}

void Acceptor::start(const AcceptedSocket& socket, const std::string& source,
                     Clock::time_point now) {
    if (const auto id = host_.start_accepted(socket)) admission_.admit(source, *id, now);
}

void Acceptor::release(std::uint64_t id) {
    const auto source = admission_.release(id);
    if (!source) return;
    // The newest socket of that source that waits gets its turn at the next deadline pass, in
    // the method's own deadline handler: not here, inside the close path of a connection.
    if (auto next = newest_waiting(*source); next != waiting_.end())
        timers_.schedule(key_of(next->number), Clock::now());
}

void Acceptor::on_deadline(DeadlineKey key, Clock::time_point now) {
    const std::uint64_t number = key.id & ~(std::uint64_t{1} << 63);
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [number](const Waiting& w) { return w.number == number; });
    if (it == waiting_.end()) return;
    // Its source's newest waiting socket goes first: a flood of silent connections waits
    // longest, and a client that came after it is not held up behind it.
    const bool newest = newest_waiting(it->source) == it;
    if (newest && room_for(it->source, now)) {
        // room_for may have closed a connection, whose close path leaves waiting_ alone.
        const AcceptedSocket socket = it->socket;
        const std::string source = std::move(it->source);
        waiting_.erase(it);
        timers_.cancel(key);
        start(socket, source, now);
        // The next of that source looks again at once: there may be room for it too.
        if (auto next = newest_waiting(source); next != waiting_.end())
            timers_.schedule(key_of(next->number), now);
        return;
    }
    if (now >= it->deadline) {
        if (support::log_enabled(area_))
            support::log_print(area_,
                               "%s: a socket from %s waited past the handshake timeout "
                               "for its source's turn; closing it",
                               method_, it->source.c_str());
        close_waiting(it);
        return;
    }
    // Not yet: when its source's oldest will have had its time to speak, or at its deadline.
    timers_.schedule(key, newest ? next_look(*it) : it->deadline);
}

void Acceptor::close_waiting(std::deque<Waiting>::iterator it) {
    timers_.cancel(key_of(it->number));
    close(it->socket.fd);
    waiting_.erase(it);
    host_.watch_listeners(true);  // a descriptor is free again
}

bool Acceptor::shed(int listen_fd) {
    if (shed_one(0)) return true;
    // Level-triggered epoll reports the pending connection again and again while accept fails,
    // which would spin the caller: the reserve descriptor takes it, to be answered and closed.
    // Counted and logged only when a connection was there: with the table full, accept fails
    // even when nobody waits (after the last one was taken).
    const auto shed = reserve_.shed(listen_fd, [this](int fd) {
        if (reserve_.count_shed())
            BMI_WARN("%s: out of file descriptors; refusing new connections (%llu so far; each "
                     "connection holds descriptors, ulimit -n)",
                     method_, reserve_.sheds());
        host_.answer_shed(fd);
    });
    // No reserve (another thread took the slot): stop watching the listener until one of our
    // own connections closes and frees a descriptor.
    if (shed == support::AcceptReserve::Shed::no_reserve) host_.watch_listeners(false);
    return shed == support::AcceptReserve::Shed::took_one;
}

bool Acceptor::shed_one(std::uint64_t keep) {
    // A socket waiting for its turn has proven nothing and its source is at its bound.
    if (!waiting_.empty()) {
        if (support::log_enabled(area_))
            support::log_print(area_,
                               "%s: out of file descriptors; closing a socket of %s "
                               "that waited for its turn",
                               method_, waiting_.front().source.c_str());
        close_waiting(waiting_.begin());
        return true;
    }
    // Else a connection that proved nothing, or that nobody uses: otherwise whoever fills the
    // table first keeps every later client out.
    SheddingChoice choice(Clock::now(), keep);
    host_.offer_for_shedding(choice);
    const auto id = choice.chosen();
    if (!id) return false;
    if (support::log_enabled(area_))
        support::log_print(area_, "%s: out of file descriptors; closing %s connection %llu",
                           method_, unproven(*id) ? "unproven" : "idle",
                           static_cast<unsigned long long>(*id));
    host_.close_for_room(*id);
    release(*id);  // if its close path did not
    return true;
}

bool Acceptor::make_room(int any_fd, std::size_t n, std::uint64_t keep) {
    std::vector<int> probes;
    bool room = true;
    while (probes.size() < n) {
        const int fd = fcntl(any_fd, F_DUPFD_CLOEXEC, 0);
        if (fd >= 0) {
            probes.push_back(fd);
            continue;
        }
        if ((errno != EMFILE && errno != ENFILE) || !shed_one(keep)) {
            room = false;
            break;
        }
    }
    for (int fd : probes) close(fd);
    return room;
}

}  // namespace bmi::method::kit
