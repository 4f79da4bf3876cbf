// SPDX-License-Identifier: LGPL-2.1-or-later
// Same-node upgrade (doc/architecture.md, "Same-node peers"): a client that looks up a tcp
// address of a libbmi server on its own node asks that server, over a tcp handshake, for an
// offer, and then reaches it over shm. The offer names the server's shm listener and carries a
// ticket; the listener admits only hellos that show a ticket it handed out, so the shm side is
// bound to a peer that met the tcp side's rules (its key, its trusted sources), never to what a
// process on the node claims.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support/sync/mutex.hpp"

namespace bmi::method::kit {

inline constexpr std::size_t ticket_size = 32;
using Ticket = std::array<std::uint8_t, ticket_size>;

// What a tcp acceptor tells a client on its node: the shm listener to dial, the instance
// nonce that listener's reply must carry (so the client knows it reached the same server),
// and the ticket to show there.
struct SameNodeOffer {
    std::string shm_name;
    std::uint64_t listener_nonce = 0;
    Ticket ticket{};
    bool operator==(const SameNodeOffer&) const = default;
};

// The shm listener name of a server's same-node offers on tcp port `port`. The abstract
// socket behind it is per user and network namespace, so only a client that shares both with
// the server finds it.
std::string same_node_listener_name(unsigned port);
// Whether shm_name is such a listener's name.
bool names_same_node_listener(std::string_view shm_name);

// True if a listener of that name (ours: our uid) is bound in this network namespace, read from
// /proc/net/unix without contacting it. A client asks a server for an offer only then, so
// that no server without one (OrangeFS's own, which logs a foreign frame) is asked. A server
// binds it when it starts (SameNodeTickets::reserve), and serves it from the first request.
bool same_node_listener_exists(std::string_view shm_name);

// The tickets of one server instance: handed out by its tcp method, shown to its shm listener.
// Both methods' threads use it, so it has its own lock, taken last.
//
// The listening socket is made when the server starts, so that clients find it; the shm
// method that serves it starts only when the first client asks (a server no client on its
// node uses keeps one method, and the wait point's direct sleep). The tcp method cannot start
// a method under its own lock, so it files the request here, answers "ask again", and the
// control layer starts the method on its next pass, outside every method lock.
class SameNodeTickets {
public:
    SameNodeTickets() = default;
    SameNodeTickets(const SameNodeTickets&) = delete;
    SameNodeTickets& operator=(const SameNodeTickets&) = delete;
    ~SameNodeTickets();

    // At server start: the listening socket `fd` (ours from now on) of `shm_name`, for clients
    // of tcp port `port`.
    void reserve(unsigned port, std::string shm_name, int fd);
    // The shm method that serves it: the socket and its name (-1 once taken, or never made).
    int take_listener(std::string& shm_name);
    // The most tickets kept; the oldest goes first. A client that shows a forgotten one is
    // asked again over tcp (ShmPeer's route), so this bounds memory, not clients.
    static constexpr std::size_t max_tickets = 4096;

    enum class Answer : std::uint8_t { offer, later, none };
    // tcp, for a client that dialled tcp port `port`: an offer with a fresh ticket; `later`
    // while its listener's method is being started (the first request files that); `none`
    // when no listener is reserved for that port or it could not be served.
    Answer answer(unsigned port, SameNodeOffer& out);
    // The control layer: true once after the first request. requested() is the inline look
    // every test call makes; take_request() settles it under the lock.
    bool requested() const { return request_pending_.load(std::memory_order_acquire); }
    bool take_request();
    // The shm method, once its same-node listener is up: offers are made from then on.
    void listener_ready(std::string shm_name, std::uint64_t nonce);
    // The control layer: no listener can run (shm failed to start one); no offers.
    void listener_unavailable();
    // True if `ticket` is one we handed out and still keep.
    bool admits(const Ticket& ticket) const;

private:
    enum class State : std::uint8_t { idle, requested, starting, ready, unavailable };
    std::atomic<bool> request_pending_{false};
    mutable support::Mutex mutex_;
    State state_ BMI_GUARDED_BY(mutex_) = State::unavailable;  // until reserve()
    unsigned port_ BMI_GUARDED_BY(mutex_) = 0;
    int listen_fd_ BMI_GUARDED_BY(mutex_) = -1;
    std::string shm_name_ BMI_GUARDED_BY(mutex_);
    std::uint64_t nonce_ BMI_GUARDED_BY(mutex_) = 0;
    std::set<Ticket> kept_ BMI_GUARDED_BY(mutex_);
    std::deque<Ticket> order_ BMI_GUARDED_BY(mutex_);
};

class SameNodeRenewals;

// How a client reaches a same-node server over shm, and asks it again for an offer when the one
// it holds may have stopped working (the server restarted: its tickets are gone). Shared by shm,
// which connects with the offer, and the control layer, which asks: asking waits on a tcp
// handshake, so it runs with no method's lock held, never inside shm's.
class SameNodeRoute : public std::enable_shared_from_this<SameNodeRoute> {
public:
    // Asks the server over tcp; blocks for at most the tcp setup deadline.
    using Ask = std::function<std::optional<SameNodeOffer>()>;
    SameNodeRoute(SameNodeOffer offer, Ask ask, std::weak_ptr<SameNodeRenewals> renewals);
    SameNodeRoute(const SameNodeRoute&) = delete;
    SameNodeRoute& operator=(const SameNodeRoute&) = delete;

    SameNodeOffer offer() const;
    // shm, under its lock: files this route to be asked again (SameNodeRenewals); false when
    // nobody can ask, and the connect goes ahead with the offer held.
    bool want_renewal();
    // The control layer, no lock held: asks, and keeps the answer; on no answer the offer held
    // stays, and the connect that waits for it is refused if the server forgot its ticket.
    void renew();

private:
    Ask ask_;
    std::weak_ptr<SameNodeRenewals> renewals_;
    // One question at a time; held while asking, with no method lock, and taken before mutex_.
    support::Mutex asking_;
    mutable support::Mutex mutex_;
    SameNodeOffer offer_ BMI_GUARDED_BY(mutex_);
};

// One client instance's routes waiting to be asked again: filed by shm under its lock, asked
// by the control layer right after the call that filed them (the post that connects), outside
// every lock, and handed back to shm (info_same_node_renewed) to connect.
class SameNodeRenewals {
public:
    // Inline: every post asks, and almost always nothing waits.
    bool pending() const { return pending_.load(std::memory_order_acquire); }
    void file(std::shared_ptr<SameNodeRoute> route);
    std::vector<std::shared_ptr<SameNodeRoute>> take();

private:
    std::atomic<bool> pending_{false};
    support::Mutex mutex_;
    std::vector<std::shared_ptr<SameNodeRoute>> wanted_ BMI_GUARDED_BY(mutex_);
};

}  // namespace bmi::method::kit
