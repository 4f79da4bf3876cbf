// SPDX-License-Identifier: LGPL-2.1-or-later
// Checks on what a peer writes into the segment or sends on the socket: ring record headers
// and the hello. Pure functions over the wire structs, so the method and the fuzz targets
// (tests/fuzz/) run the very same code; false or -1 means the peer broke the protocol.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "bmi-types.h"
#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

// Payload bytes that follow a record's header, by type; -1 for an unknown type or a field
// out of range. Checked before anything is allocated from or copied out of the record.
inline long long record_payload(const MsgHeader& h) {
    switch (static_cast<MsgType>(h.type)) {
        case MsgType::eager:
            // No instance sends larger eager messages; checked before anything is buffered.
            return h.size > max_eager_limit ? -1 : static_cast<long long>(h.size);
        case MsgType::unexpected:
            // aux is the message class, a uint8 on every API that can name one.
            if (h.aux < 0 || h.aux > 255) return -1;
            return h.size > (1ull << 40) ? -1 : static_cast<long long>(h.size);
        case MsgType::data:
            return h.size > (1ull << 40) ? -1 : static_cast<long long>(h.size);
        case MsgType::rts:
            return h.aux < 0 ? -1 : static_cast<long long>(h.aux) * 16;
        case MsgType::help:
            return h.aux < 0 ? -1 : static_cast<long long>(sizeof(HelpInfo) + h.aux * 16ull);
        case MsgType::cts:
        case MsgType::done:
        case MsgType::nak:
            return 0;
    }
    return -1;
}

// True if a header's slot count is the one its payload needs and no more than a producer may
// claim (max_slots, half the ring). At full width: with 256-byte slots, Ring::slots_for's
// 32-bit count wraps for a payload near 2^40 and a one-slot record claiming a terabyte passed.
inline bool record_slots_match(std::uint32_t max_slots, std::uint32_t slot_size, const MsgHeader& h,
                               long long payload) {
    std::uint64_t bytes = ring_stamp_size + header_size + static_cast<std::uint64_t>(payload);
    std::uint64_t needed = (bytes + slot_size - 1) / slot_size;
    return h.slots != 0 && h.slots <= max_slots && needed == h.slots;
}

// Payload bytes one record may carry on `ring`: half the ring, less the stamp and the header.
// An acceptor's rings have the initiator's geometry, which may be smaller than its own, so
// a sender holds each message to the limit of the connection it goes on.
inline long long ring_payload_limit(const Ring& ring) {
    return static_cast<long long>(ring.max_message_slots()) * ring.slot_size() -
           static_cast<long long>(ring_stamp_size + header_size);
}

// The largest message that goes inline on a connection whose ring we fill is tx: our eager
// limit, within what one record there may carry.
inline bmi_size_t inline_limit(const Ring& tx, bmi_size_t eager_limit) {
    return std::min<bmi_size_t>(eager_limit, ring_payload_limit(tx));
}

// A whole, consistent record: its payload size, or -1. The caller may then peek h.slots.
// A record longer than half the ring is one no producer writes (it waits for half the ring
// at most), so it is malformed even though it would fit the slots.
inline long long check_record(const Ring& ring, const MsgHeader& h) {
    long long payload = record_payload(h);
    if (payload < 0 || !record_slots_match(ring.max_message_slots(), ring.slot_size(), h, payload))
        return -1;
    return payload;
}

// The fields of a connecting peer's hello that the acceptor believes: this protocol, a ring
// geometry both sides can use, a doorbell index inside a doorbell and, if it listens, a valid
// name.
inline bool hello_well_formed(const Hello& hello) {
    return hello.magic == hello_magic && hello.version == protocol_version &&
           valid_geometry(hello.slot_count, hello.slot_size) &&
           hello.doorbell_index < doorbell_capacity && hello.name_length <= max_name_length &&
           hello.unexpected_limit > 0 && hello.unexpected_limit <= max_stated_unexpected_limit &&
           (hello.name_length == 0 || valid_name(std::string_view(hello.name, hello.name_length)));
}

// An acceptor's reply the initiator believes: this protocol, an acceptance, and a doorbell
// index inside a doorbell (a refusal, status -BMI_EACCES, is read before this check).
inline bool reply_well_formed(const HelloReply& reply) {
    return reply.magic == hello_magic && reply.version == protocol_version && reply.status == 0 &&
           reply.doorbell_index < doorbell_capacity && reply.unexpected_limit > 0 &&
           reply.unexpected_limit <= max_stated_unexpected_limit;
}

}  // namespace bmi::method::shm
