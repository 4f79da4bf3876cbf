// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/kit/same_node.hpp"

#include <unistd.h>

#include <string>
#include <utility>

#include "support/keys/key_proof.hpp"
#include "support/local_socket/abstract_address.hpp"

namespace bmi::method::kit {

namespace {
constexpr std::string_view same_node_listener_prefix = "same-node.tcp-";
}  // namespace

std::string same_node_listener_name(unsigned port) {
    return std::string(same_node_listener_prefix) + std::to_string(port);
}

bool names_same_node_listener(std::string_view shm_name) {
    return shm_name.starts_with(same_node_listener_prefix);
}

bool same_node_listener_exists(std::string_view shm_name) {
    return support::abstract_name_bound(support::shm_listener_socket_name(shm_name));
}

SameNodeTickets::~SameNodeTickets() {
    support::MutexLock lock(mutex_);
    if (listen_fd_ >= 0) close(listen_fd_);
}

void SameNodeTickets::reserve(unsigned port, std::string shm_name, int fd) {
    support::MutexLock lock(mutex_);
    port_ = port;
    shm_name_ = std::move(shm_name);
    listen_fd_ = fd;
    state_ = State::idle;
}

int SameNodeTickets::take_listener(std::string& shm_name) {
    support::MutexLock lock(mutex_);
    shm_name = shm_name_;
    return std::exchange(listen_fd_, -1);
}

SameNodeTickets::Answer SameNodeTickets::answer(unsigned port, SameNodeOffer& out) {
    support::MutexLock lock(mutex_);
    if (port != port_) return Answer::none;
    switch (state_) {
        case State::idle:
            state_ = State::requested;
            request_pending_.store(true, std::memory_order_release);
            return Answer::later;
        case State::requested:
        case State::starting:
            return Answer::later;
        case State::unavailable:
            return Answer::none;
        case State::ready:
            break;
    }
    out.shm_name = shm_name_;
    out.listener_nonce = nonce_;
    const support::keys::Nonce random = support::keys::fresh_nonce();
    static_assert(sizeof random == ticket_size);
    std::copy(random.begin(), random.end(), out.ticket.begin());
    if (order_.size() == max_tickets) {
        kept_.erase(order_.front());
        order_.pop_front();
    }
    kept_.insert(out.ticket);
    order_.push_back(out.ticket);
    return Answer::offer;
}

bool SameNodeTickets::take_request() {
    if (!requested()) return false;
    support::MutexLock lock(mutex_);
    request_pending_.store(false, std::memory_order_relaxed);
    if (state_ != State::requested) return false;
    state_ = State::starting;
    return true;
}

void SameNodeTickets::listener_ready(std::string shm_name, std::uint64_t nonce) {
    support::MutexLock lock(mutex_);
    shm_name_ = std::move(shm_name);
    nonce_ = nonce;
    state_ = State::ready;
}

void SameNodeTickets::listener_unavailable() {
    support::MutexLock lock(mutex_);
    state_ = State::unavailable;
    if (listen_fd_ >= 0) close(std::exchange(listen_fd_, -1));
}

bool SameNodeTickets::admits(const Ticket& ticket) const {
    support::MutexLock lock(mutex_);
    return kept_.count(ticket) != 0;
}

SameNodeRoute::SameNodeRoute(SameNodeOffer offer, Ask ask, std::weak_ptr<SameNodeRenewals> renewals)
    : ask_(std::move(ask)), renewals_(std::move(renewals)), offer_(std::move(offer)) {}

SameNodeOffer SameNodeRoute::offer() const {
    support::MutexLock lock(mutex_);
    return offer_;
}

bool SameNodeRoute::want_renewal() {
    auto renewals = renewals_.lock();
    if (!ask_ || !renewals) return false;
    renewals->file(shared_from_this());
    return true;
}

void SameNodeRoute::renew() {
    support::MutexLock one_question(asking_);
    std::optional<SameNodeOffer> fresh = ask_();
    if (!fresh) return;
    support::MutexLock lock(mutex_);
    offer_ = std::move(*fresh);
}

void SameNodeRenewals::file(std::shared_ptr<SameNodeRoute> route) {
    support::MutexLock lock(mutex_);
    wanted_.push_back(std::move(route));
    pending_.store(true, std::memory_order_release);
}

std::vector<std::shared_ptr<SameNodeRoute>> SameNodeRenewals::take() {
    support::MutexLock lock(mutex_);
    pending_.store(false, std::memory_order_relaxed);
    return std::exchange(wanted_, {});
}

}  // namespace bmi::method::kit
