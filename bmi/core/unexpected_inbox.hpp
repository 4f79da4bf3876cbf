// SPDX-License-Identifier: LGPL-2.1-or-later
// Unexpected messages on their way to the application: the memory a method gets for one,
// charged to the instance's quota and to the sender's share of it (support::Budget, the type
// the methods charge their early messages to), the queue BMI_testunexpected empties, and which
// arrivals a test call has announced. A message's sender keeps its address until the message
// is reported (AddressBook::hold_for_unexpected_locked). Guarded by the instance's state lock.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>

#include "bmi/core/address_book.hpp"
#include "bmi/core/instance_types.hpp"
#include "support/budget/budget.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

class UnexpectedInbox {
public:
    explicit UnexpectedInbox(support::Mutex& state) : state_(state) {}
    // Frees the buffers the application never returned.
    ~UnexpectedInbox();
    UnexpectedInbox(const UnexpectedInbox&) = delete;
    UnexpectedInbox& operator=(const UnexpectedInbox&) = delete;

    void assert_held() const BMI_ASSERT_CAPABILITY(state_) { state_.assert_held(); }

    // quota bytes over all peers, peer_share of them per peer (0: an eighth of the quota,
    // never less than a few full-size messages).
    void set_quota(bmi_size_t quota, bmi_size_t peer_share);
    // Sink::alloc_unexpected: a buffer of size bytes, or nullptr while peer or everybody is
    // over the quota.
    void* allocate(const method::Peer& peer, bmi_size_t size);
    // Sink::deliver_unexpected: files the message under its sender's address.
    void deliver(AddressBook& addresses, int method_index,
                 const std::shared_ptr<method::Peer>& peer, void* buffer, bmi_size_t size,
                 bmi_msg_tag_t tag, std::uint8_t msg_class);
    // BMI_unexpected_free: 0, or -BMI_EINVAL for a buffer not handed out or already freed.
    // refused_before: whether an allocation was refused since the last release that said so
    // (a method then waits for room, and a sleeper must be woken to let it look again).
    int release(void* buffer, bool& refused_before);
    // The bytes used and the limit (BMI_UNEXPECTED_QUOTA_USE).
    void usage(BMI_unexpected_quota_use& out);

    // Moves the oldest messages of msg_class (nullopt: any) to out; the count moved.
    int take_locked(AddressBook& addresses, bool take_references, std::span<UnexpectedMessage> out,
                    std::optional<std::uint8_t> msg_class) BMI_REQUIRES(state_);
    // True once for every run of arrivals no test call has reported or announced yet.
    bool announce_locked() BMI_REQUIRES(state_);

private:
    // Every message costs this much beyond its payload (the record, the allocation): with it
    // the quota bounds the count of messages as well as their bytes.
    static constexpr bmi_size_t overhead = 256;
    struct Charge {
        bmi_size_t cost = 0;
        std::uint64_t peer_serial = 0;  // method::Peer::serial of the sender
    };

    support::Mutex& state_;  // the instance's state lock
    support::Budget quota_ BMI_GUARDED_BY(state_);
    // What each peer's buffers cost while the application holds them, by peer serial: the
    // buffers may outlive the peer.
    std::unordered_map<std::uint64_t, support::Budget::Account> by_peer_ BMI_GUARDED_BY(state_);
    // Buffers handed out, with what each costs and whose it is.
    std::unordered_map<void*, Charge> charges_ BMI_GUARDED_BY(state_);
    bool quota_warned_ BMI_GUARDED_BY(state_) = false;
    bool refused_ BMI_GUARDED_BY(state_) = false;  // an allocation failed for the quota
    std::deque<UnexpectedMessage> queue_ BMI_GUARDED_BY(state_);
    // Messages delivered so far, and how many of them a test call has reported (testcontext's
    // early return, or testunexpected emptying the queue).
    std::uint64_t arrivals_ BMI_GUARDED_BY(state_) = 0;
    std::uint64_t reported_ BMI_GUARDED_BY(state_) = 0;
};

}  // namespace bmi::core
