// SPDX-License-Identifier: LGPL-2.1-or-later
// The listener half of the kit, written once for every method: accepting, the descriptor
// reserve, per-source admission and shedding (doc/writing-a-method.md, "Listener").
//
// Per source, at most `per_source` accepted connections may be unproven (their handshake not
// done). A newcomer beyond that replaces the source's oldest if that one had its time to
// speak; else it waits, holding only its descriptor, until one of its source's handshakes ends
// or the oldest has had its time (then it replaces that one), at most until its own setup
// deadline. The newest waiting socket of a source goes first: a flood of silent connections
// waits longest, and a client that comes after it waits a second at most. So neither a burst
// of one node's processes connecting at once nor one hostile process locks the other clients
// of its host out.
//
// Out of descriptors, the newcomer takes the descriptor of a waiting socket first, then of the
// oldest unproven connection, then of the oldest idle one, of those that had their time to
// speak; with none of them, it is taken on the reserve descriptor, answered where the method's
// wire can say why, and closed.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>

#include "methods/kit/deadlines.hpp"
#include "methods/kit/source_admission.hpp"
#include "support/epoll/accept_reserve.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::kit {

// How long an accepted connection may stay silent before a newcomer may take its place.
inline constexpr std::chrono::milliseconds time_to_speak{1000};

// Picks the connection that gives its descriptor to a newcomer when the table is full.
class SheddingChoice {
public:
    using Clock = std::chrono::steady_clock;
    // `keep`: a connection never chosen (0: none).
    explicit SheddingChoice(Clock::time_point now, std::uint64_t keep = 0)
        : now_(now), keep_(keep) {}
    // An accepted connection that is unproven, or proven and idle (nothing in flight either
    // way, no address handed out). Busy connections are never offered.
    void offer(std::uint64_t ticket, Clock::time_point accepted_at, bool unproven);
    // The oldest unproven one that had its time to speak, else the oldest such idle one.
    std::optional<std::uint64_t> chosen() const;

private:
    struct Candidate {
        std::uint64_t ticket;
        Clock::time_point at;
    };
    Clock::time_point now_;
    std::uint64_t keep_;
    std::optional<Candidate> unproven_;
    std::optional<Candidate> idle_;
};

// One accepted socket, as the acceptor hands it to the method.
struct AcceptedSocket {
    int fd = -1;
    sockaddr_storage from{};
    socklen_t length = 0;
    std::uint64_t listener = 0;  // the method's tag for the listening socket it came from
    std::int64_t peer_id = 0;    // what source_of learned of the peer, for start_accepted
};

// What only the method knows about its connections.
class AcceptorHost {
public:
    virtual ~AcceptorHost() = default;
    // The source the socket counts against, or nullopt to refuse it (the acceptor closes it):
    // tcp refuses untrusted networks, shm other users. It may note in peer_id what it learned.
    virtual std::optional<std::string> source_of(AcceptedSocket& socket) = 0;
    // Starts the connection of an admitted socket, which it owns from now on; returns the
    // connection's id, or nullopt if it closed the socket.
    virtual std::optional<std::uint64_t> start_accepted(const AcceptedSocket& socket) = 0;
    // Closes the connection with this id to make room (its close path calls release()).
    virtual void close_for_room(std::uint64_t id) = 0;
    // Offers each accepted connection that is unproven, or proven and idle, to `choice`.
    virtual void offer_for_shedding(SheddingChoice& choice) = 0;
    // Stops (false) or resumes watching the listening sockets.
    virtual void watch_listeners(bool on) = 0;
    // Writes why to a socket taken only to be closed, where the method's wire can say it. The
    // acceptor has logged the refusal: the method adds no line of its own.
    virtual void answer_shed(int fd) { (void)fd; }
};

class Acceptor {
public:
    using Clock = std::chrono::steady_clock;
    Acceptor(AcceptorHost& host, Deadlines& timers, support::LogArea area, const char* method)
        : host_(host), timers_(timers), area_(area), method_(method) {}
    ~Acceptor();
    Acceptor(const Acceptor&) = delete;
    Acceptor& operator=(const Acceptor&) = delete;

    // `per_source`: the unproven connections one source may hold; `setup_timeout`: how long a
    // waiting socket may wait (it would have had as long for its handshake).
    void set_limits(std::size_t per_source, std::chrono::milliseconds setup_timeout);
    // Holds the reserve descriptor; call when listening starts, while descriptors are free.
    void keep_reserve() { reserve_.keep(); }

    // Accepts what waits on listen_fd, at most `max` sockets.
    void accept_all(int listen_fd, std::uint64_t listener,
                    std::size_t max = std::numeric_limits<std::size_t>::max());
    // The connection `id` finished its handshake or closed: its place is free, and a socket of
    // its source that waits is admitted at the next deadline pass. Nothing if it held none.
    void release(std::uint64_t id);
    bool unproven(std::uint64_t id) const { return admission_.holds(id); }
    // Frees descriptors, shedding as for a newcomer but never the connection `keep`, until `n`
    // more can be opened: for a handshake that brings descriptors along (shm's hello), which
    // the kernel would drop, losing the message, if they did not fit. `any_fd`: an open
    // descriptor to probe with. False if they cannot be had.
    bool make_room(int any_fd, std::size_t n, std::uint64_t keep);

    // The method's deadline handler hands the keys owns() to on_deadline().
    static bool owns(DeadlineKey key) { return key.kind == DeadlineKind::admission; }
    void on_deadline(DeadlineKey key, Clock::time_point now);

    std::size_t waiting() const { return waiting_.size(); }
    std::size_t held(const std::string& source) const { return admission_.held(source); }
    unsigned long long sheds() const { return reserve_.sheds(); }

    // Sockets that may wait for their source's turn, all sources together.
    static constexpr std::size_t waiting_limit = 1024;

private:
    struct Waiting {
        std::uint64_t number;
        AcceptedSocket socket;
        std::string source;
        Clock::time_point deadline;
    };
    void admit_or_wait(const AcceptedSocket& socket, std::string source, Clock::time_point now);
    // True if `source` may start one more now, after closing its oldest unfinished handshake
    // if that one had its time to speak.
    bool room_for(const std::string& source, Clock::time_point now);
    // When a waiting socket looks again: once its source's oldest has had its time to speak,
    // or at its own deadline.
    Clock::time_point next_look(const Waiting& w) const;
    // The socket of `source` that came last of those waiting, or end().
    std::deque<Waiting>::iterator newest_waiting(const std::string& source);
    void start(const AcceptedSocket& socket, const std::string& source, Clock::time_point now);
    // Out of descriptors: frees one for the connection waiting on listen_fd, or takes and
    // closes that connection. True if accepting may go on.
    bool shed(int listen_fd);
    // Closes one waiting socket or connection, never `keep`; false if none may go.
    bool shed_one(std::uint64_t keep);
    void close_waiting(std::deque<Waiting>::iterator it);
    // Apart from every method's connection ids, which a connection's cancel_all() clears.
    static DeadlineKey key_of(std::uint64_t number) {
        return {number | (std::uint64_t{1} << 63), DeadlineKind::admission};
    }

    AcceptorHost& host_;
    Deadlines& timers_;
    support::LogArea area_;
    const char* method_;
    std::chrono::milliseconds setup_timeout_{10'000};
    SourceAdmission admission_;
    std::deque<Waiting> waiting_;  // in arrival order
    std::uint64_t next_waiting_ = 1;
    support::AcceptReserve reserve_;
};

}  // namespace bmi::method::kit
