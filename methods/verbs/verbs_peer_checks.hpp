// SPDX-License-Identifier: LGPL-2.1-or-later
// Arithmetic on numbers a peer sends us: credits and RTS lengths. A peer is untrusted
// (SPEC.md §6), so each sum is checked before it is believed; false means the peer broke the
// protocol and its connection is closed. Pure functions, so they are tested without a device.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "methods/verbs/verbs_wire.hpp"

namespace bmi::method::verbs {

// One message other than CREDIT arrived: it spends one of the credits we granted the peer
// (our HELLO's window plus every credit we returned since). A peer with none left sent past
// its window and is holding shared receive buffers that belong to everyone else.
inline bool spend_granted_credit(int& granted) {
    if (granted <= 0) return false;
    --granted;
    return true;
}

// The peer returns `returned` credits for eager buffers of theirs that we used. We can never
// hold more than the window it granted in its HELLO: more means it returned credits for
// messages we never sent (or a wrapped counter), which would let us overrun its buffers.
inline bool take_returned_credits(int& send_credits, std::uint32_t returned, int window) {
    if (returned > static_cast<std::uint32_t>(window) ||
        send_credits > window - static_cast<int>(returned))
        return false;
    send_credits += static_cast<int>(returned);
    return true;
}

// The bytes an RTS offers: the sum of its segment lengths, or nullopt if a segment is empty,
// the sum wraps or it passes `limit` (a wrapped sum could match any size the RTS claims).
inline std::optional<std::uint64_t> rts_total(std::span<const RemoteSegment> segments,
                                              std::uint64_t limit) {
    std::uint64_t sum = 0;
    for (const auto& s : segments)
        if (s.length == 0 || __builtin_add_overflow(sum, s.length, &sum) || sum > limit)
            return std::nullopt;
    return sum;
}

}  // namespace bmi::method::verbs
