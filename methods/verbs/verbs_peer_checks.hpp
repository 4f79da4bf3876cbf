// SPDX-License-Identifier: LGPL-2.1-or-later
// Checks on what a peer sends us: its bootstrap HELLO, credits, message bodies and RTS
// lengths. A peer is untrusted (SPEC.md §6), so each number is checked before it is believed;
// false means the peer broke the protocol and its connection is closed. Pure functions, so
// they are tested and fuzzed (tests/fuzz/) without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include <infiniband/verbs.h>

#include "methods/verbs/verbs_records.hpp"
#include "methods/verbs/verbs_wire.hpp"

namespace bmi::method::verbs {

// Same magic and protocol version: only then is anything else in the HELLO meaningful.
inline bool hello_speaks_our_protocol(const Hello& h) {
    return h.magic == hello_magic && h.version == protocol_version;
}

// The same from a HELLO's first hello_version_end bytes (false with fewer): a HELLO of
// another version has another size, so the rest may never come.
inline bool hello_speaks_our_protocol(std::span<const std::uint8_t> start) {
    if (start.size() < hello_version_end) return false;
    std::uint32_t magic = 0;
    std::uint16_t version = 0;
    std::memcpy(&magic, start.data() + offsetof(Hello, magic), sizeof magic);
    std::memcpy(&version, start.data() + offsetof(Hello, version), sizeof version);
    return magic == hello_magic && version == protocol_version;
}

// A HELLO whose numbers we can build a queue pair from: a credit window of 1-4096, our eager
// size, an MTU the device enum knows, a name that fits its field and an unexpected limit
// within our eager size.
inline bool hello_well_formed(const Hello& h) {
    return hello_speaks_our_protocol(h) && h.name_length <= max_name && h.credits >= 1 &&
           h.credits <= 4096 && h.eager_payload == eager_payload && h.mtu >= IBV_MTU_256 &&
           h.mtu <= IBV_MTU_4096 && h.unexpected_limit >= 1 && h.unexpected_limit <= eager_payload;
}

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

// An EAGER or UNEXPECTED body is exactly the size its header claims; an RTS body is 1 to
// max_rts_segments segments whose lengths sum to that size (at most `limit`), copied to segs.
// `sealed`: the connection is encrypted, so an RTS offers one segment, the sealed copy.
inline bool data_message_well_formed(const MsgHeader& h, std::span<const std::uint8_t> body,
                                     std::uint64_t limit, std::vector<RemoteSegment>& segs,
                                     bool sealed = false) {
    if (static_cast<MsgType>(h.type) != MsgType::rts) return body.size() == h.size;
    if (h.seg_count < 1 || h.seg_count > (sealed ? 1 : max_rts_segments) ||
        body.size() != h.seg_count * sizeof(RemoteSegment) || h.size > limit)
        return false;
    segs.resize(h.seg_count);
    std::memcpy(segs.data(), body.data(), body.size());
    auto total = rts_total(segs, sealed ? sealed_size(limit) : limit);
    return total && *total == (sealed ? sealed_size(h.size) : h.size);
}

}  // namespace bmi::method::verbs
