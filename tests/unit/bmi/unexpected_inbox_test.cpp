// SPDX-License-Identifier: LGPL-2.1-or-later
// The unexpected-message inbox on its own: the quota and a peer's share of it, buffers handed
// back, and the queue with its classes, its senders' addresses and testcontext's announcements.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "bmi/core/address_book.hpp"
#include "bmi/core/method_set.hpp"
#include "bmi/core/unexpected_inbox.hpp"
#include "bmi/core/wait_point.hpp"

using namespace bmi;

namespace {
class PlainPeer final : public method::Peer {};

// An inbox with the address book it files senders in, as an Instance has them.
struct Parts {
    int error = 0;
    support::Mutex state;
    core::WaitPoint wait_point{error};
    core::MethodSet methods{wait_point};
    core::AddressBook addresses{state, methods};
    core::UnexpectedInbox inbox{state};
};

constexpr bmi_size_t overhead = 256;  // what every message costs beyond its payload
}  // namespace

TEST_CASE("unexpected inbox: the quota bounds all peers, a share each one") {
    Parts parts;
    bool refused = false;
    REQUIRE(parts.error == 0);
    parts.inbox.set_quota(4 * 1024, 2 * 1024);
    PlainPeer a, b, c;
    void* a1 = parts.inbox.allocate(a, 1000);
    REQUIRE(a1 != nullptr);
    CHECK(parts.inbox.allocate(a, 1000) == nullptr);  // a's share: 2 * 1256 > 2048
    void* b1 = parts.inbox.allocate(b, 1200);
    REQUIRE(b1 != nullptr);
    void* b2 = parts.inbox.allocate(b, 200);
    REQUIRE(b2 != nullptr);
    BMI_unexpected_quota_use use{};
    parts.inbox.usage(use);
    CHECK(use.used == 1000 + 1200 + 200 + 3 * overhead);
    CHECK(use.limit == 4 * 1024);
    CHECK(parts.inbox.allocate(c, 700) == nullptr);  // the total: 3168 + 956 > 4096
    REQUIRE(parts.inbox.release(b1, refused) == 0);
    CHECK(refused);  // someone waits for room: the caller wakes the methods
    void* c1 = parts.inbox.allocate(c, 700);
    CHECK(c1 != nullptr);
    CHECK(parts.inbox.release(a1, refused) == 0);
    CHECK_FALSE(refused);  // nothing was refused since: no wake-up needed
    CHECK(parts.inbox.release(a1, refused) == -BMI_EINVAL);  // already freed
    int foreign = 0;
    CHECK(parts.inbox.release(&foreign, refused) == -BMI_EINVAL);
    CHECK(parts.inbox.release(c1, refused) == 0);
    CHECK(parts.inbox.release(b2, refused) == 0);
    parts.inbox.usage(use);
    CHECK(use.used == 0);
}

TEST_CASE("unexpected inbox: a peer's share defaults to an eighth, at least 64 KiB") {
    Parts parts;
    bool refused = false;
    parts.inbox.set_quota(1 << 20, 0);
    PlainPeer a;
    void* first = parts.inbox.allocate(a, 100 * 1024);  // a peer's first message is not judged
    REQUIRE(first != nullptr);
    CHECK(parts.inbox.allocate(a, 30 * 1024) == nullptr);  // 128 KiB share
    void* small = parts.inbox.allocate(a, 20 * 1024);
    CHECK(small != nullptr);
    CHECK(parts.inbox.release(first, refused) == 0);
    CHECK(parts.inbox.release(small, refused) == 0);
}

TEST_CASE("unexpected inbox: no announced size can overflow the charge") {
    Parts parts;
    parts.inbox.set_quota(std::numeric_limits<bmi_size_t>::max(), 0);
    PlainPeer a;
    CHECK(parts.inbox.allocate(a, std::numeric_limits<bmi_size_t>::max()) == nullptr);
    CHECK(parts.inbox.allocate(a, std::numeric_limits<bmi_size_t>::max() - overhead + 1) ==
          nullptr);
    CHECK(parts.inbox.allocate(a, -1) == nullptr);
}

TEST_CASE("unexpected inbox: messages wait by class and hold their sender's address") {
    Parts parts;
    parts.inbox.set_quota(1 << 20, 0);
    auto peer = std::make_shared<PlainPeer>();
    auto deliver = [&](std::uint8_t msg_class) {
        void* buffer = parts.inbox.allocate(*peer, 8);
        REQUIRE(buffer != nullptr);
        parts.inbox.deliver(parts.addresses, 0, peer, buffer, 8, 7, msg_class);
        return buffer;
    };
    void* first = deliver(1);
    void* second = deliver(2);
    const BMI_addr_t addr = peer->addr();
    REQUIRE(addr != 0);

    std::vector<core::UnexpectedMessage> out(4);
    support::MutexLock lock(parts.state);
    parts.inbox.assert_held();
    parts.addresses.assert_held();
    CHECK(parts.addresses.find_locked(addr)->unreported_unexpected == 2);
    CHECK(parts.inbox.announce_locked());  // two arrivals, announced once
    CHECK_FALSE(parts.inbox.announce_locked());
    REQUIRE(parts.inbox.take_locked(parts.addresses, true, out, 2) == 1);
    CHECK(out[0].buffer == second);
    CHECK(out[0].addr == addr);
    CHECK(out[0].tag == 7);
    core::AddressEntry* entry = parts.addresses.find_locked(addr);
    CHECK(entry->unreported_unexpected == 1);
    CHECK(entry->ref_count == 1);  // BMI_AUTO_REF_COUNT's reference
    REQUIRE(parts.inbox.take_locked(parts.addresses, false, out, std::nullopt) == 1);
    CHECK(out[0].buffer == first);
    CHECK(entry->unreported_unexpected == 0);
    CHECK(entry->ref_count == 1);
    CHECK(parts.inbox.take_locked(parts.addresses, false, out, std::nullopt) == 0);
    CHECK_FALSE(parts.inbox.announce_locked());
}

TEST_CASE("unexpected inbox: a test call that empties the queue leaves nothing to announce") {
    Parts parts;
    parts.inbox.set_quota(1 << 20, 0);
    auto peer = std::make_shared<PlainPeer>();
    void* buffer = parts.inbox.allocate(*peer, 1);
    REQUIRE(buffer != nullptr);
    parts.inbox.deliver(parts.addresses, 0, peer, buffer, 1, 0, 0);
    std::vector<core::UnexpectedMessage> out(1);
    support::MutexLock lock(parts.state);
    parts.inbox.assert_held();
    REQUIRE(parts.inbox.take_locked(parts.addresses, false, out, std::nullopt) == 1);
    CHECK_FALSE(parts.inbox.announce_locked());
}
