// SPDX-License-Identifier: LGPL-2.1-or-later
// The unexpected-message quota and queue; see the header.
#include "bmi/core/unexpected_inbox.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "support/logging/log.hpp"

namespace bmi::core {

UnexpectedInbox::~UnexpectedInbox() {
    for (auto& [buffer, charge] : charges_) std::free(buffer);
}

void UnexpectedInbox::set_quota(bmi_size_t quota, bmi_size_t peer_share) {
    if (peer_share == 0) peer_share = std::max<bmi_size_t>(quota / 8, 64 << 10);
    support::Budget::Limits limits;
    limits.total_bytes = quota;
    limits.peer_bytes = peer_share;
    support::MutexLock lock(state_);
    quota_.set_limits(limits);
}

void* UnexpectedInbox::allocate(const method::Peer& peer, bmi_size_t size) {
    if (size < 0 || size > std::numeric_limits<bmi_size_t>::max() - overhead) return nullptr;
    // The fixed part makes a stream of empty messages as bounded as one of full ones.
    const bmi_size_t cost = size + overhead;
    support::MutexLock lock(state_);
    if (!quota_.fits_total(cost)) {
        // Backpressure is right, but a server whose application never frees unexpected buffers
        // hangs with it: say so once, without BMI_DEBUG (the method retries every progress call).
        if (!quota_warned_)
            BMI_WARN("unexpected-message quota full (%lld of %lld bytes not yet returned by "
                     "BMI_unexpected_free): a peer's unexpected messages wait in the network "
                     "until memory is freed; raise the quota with BMI_UNEXPECTED_QUOTA=BYTES or "
                     "the unexpected_quota= option of BMI_initialize",
                     static_cast<long long>(quota_.total()),
                     static_cast<long long>(quota_.limits().total_bytes));
        quota_warned_ = true;
        refused_ = true;
        return nullptr;
    }
    // One peer cannot crowd every other out of the quota: past its share it waits too.
    auto held = by_peer_.find(peer.serial());
    if (held != by_peer_.end() && !quota_.fits(held->second, cost)) {
        refused_ = true;
        return nullptr;
    }
    void* buffer = std::malloc(static_cast<std::size_t>(size > 0 ? size : 1));
    if (buffer == nullptr) return nullptr;
    quota_.charge(by_peer_[peer.serial()], cost);
    charges_.emplace(buffer, Charge{cost, peer.serial()});
    return buffer;
}

void UnexpectedInbox::deliver(AddressBook& addresses, int method_index,
                              const std::shared_ptr<method::Peer>& peer, void* buffer,
                              bmi_size_t size, bmi_msg_tag_t tag, std::uint8_t msg_class) {
    support::MutexLock lock(state_);
    addresses.assert_held();  // the same lock
    const BMI_addr_t addr = addresses.hold_for_unexpected_locked(method_index, peer);
    queue_.push_back(UnexpectedMessage{0, addr, buffer, size, tag, msg_class});
    ++arrivals_;
}

int UnexpectedInbox::release(void* buffer, bool& refused_before) {
    refused_before = false;
    {
        support::MutexLock lock(state_);
        auto it = charges_.find(buffer);
        // Unknown or already freed: refuse instead of corrupting the heap.
        if (it == charges_.end()) return -BMI_EINVAL;
        const Charge charge = it->second;
        charges_.erase(it);
        auto& account = by_peer_[charge.peer_serial];
        quota_.release(account, charge.cost);
        if (account.count <= 0) by_peer_.erase(charge.peer_serial);
        refused_before = std::exchange(refused_, false);
    }
    std::free(buffer);
    return 0;
}

void UnexpectedInbox::usage(BMI_unexpected_quota_use& out) {
    support::MutexLock lock(state_);
    out.used = quota_.total();
    out.limit = quota_.limits().total_bytes;
}

int UnexpectedInbox::take_locked(AddressBook& addresses, bool take_references,
                                 std::span<UnexpectedMessage> out,
                                 std::optional<std::uint8_t> msg_class) {
    addresses.assert_held();  // the same lock
    std::size_t taken = 0;
    // Messages of other classes stay queued in arrival order; the quota bounds how many
    // there can be to step over.
    for (auto it = queue_.begin(); it != queue_.end() && taken < out.size();) {
        if (msg_class && it->msg_class != *msg_class) {
            ++it;
            continue;
        }
        addresses.unexpected_reported_locked(it->addr, take_references);
        out[taken++] = *it;
        it = queue_.erase(it);
    }
    // Everything queued is in the caller's hands: no testcontext needs to announce it.
    if (queue_.empty()) reported_ = arrivals_;
    return static_cast<int>(taken);
}

bool UnexpectedInbox::announce_locked() {
    if (reported_ == arrivals_) return false;
    reported_ = arrivals_;
    return true;
}

}  // namespace bmi::core
