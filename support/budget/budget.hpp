// SPDX-License-Identifier: LGPL-2.1-or-later
// What peers may make an instance keep before the application or a receive claims it: bytes
// and a count per peer, and bytes over all peers (SPEC §6). The methods charge their early
// messages (eager payloads and announcements that arrived before a receive) to one, the control
// layer its unexpected-message quota to another. The keeper asks fits() before it takes a
// message out of the network, charge()s what it keeps and release()s it when it is claimed or
// dropped. A message that does not fit stays in the network, so the sender waits in its own
// buffers (tcp: the socket; shm: the ring), never in our memory. One type for both layers, so
// that the rule, and the arithmetic that an attacker probes, are written once.
#pragma once

#include <cstdint>
#include <limits>

namespace bmi::support {

class Budget {
public:
    struct Limits {
        std::int64_t peer_bytes = std::numeric_limits<std::int64_t>::max();
        std::int64_t peer_count = std::numeric_limits<std::int64_t>::max();
        std::int64_t total_bytes = std::numeric_limits<std::int64_t>::max();
    };
    // One peer's share of what is kept.
    struct Account {
        std::int64_t bytes = 0;
        std::int64_t count = 0;
    };

    Budget() = default;
    explicit Budget(const Limits& limits) : limits_(limits) {}
    void set_limits(const Limits& limits) { limits_ = limits; }
    const Limits& limits() const { return limits_; }

    // True if one more message of `cost` bytes may be kept for this peer. Written so that no
    // sum can overflow, whatever cost a peer announces.
    bool fits(const Account& peer, std::int64_t cost) const {
        return fits_total(cost) && peer.count < limits_.peer_count &&
               peer.bytes <= limits_.peer_bytes && cost <= limits_.peer_bytes - peer.bytes;
    }
    // The part of fits() that is about all peers together: false once the keeper is full.
    bool fits_total(std::int64_t cost) const {
        return cost >= 0 && total_ <= limits_.total_bytes && cost <= limits_.total_bytes - total_;
    }
    void charge(Account& peer, std::int64_t cost) {
        peer.bytes += cost;
        peer.count += 1;
        total_ += cost;
    }
    void release(Account& peer, std::int64_t cost) {
        peer.bytes -= cost;
        peer.count -= 1;
        total_ -= cost;
    }
    std::int64_t total() const { return total_; }

private:
    Limits limits_;
    std::int64_t total_ = 0;
};

}  // namespace bmi::support
