// SPDX-License-Identifier: LGPL-2.1-or-later
// What the ofi method puts in a 64-bit libfabric tag, and the few control messages' bodies.
//
//   bit 63      0: a control or small message, taken by the posted receive buffers
//               1: a large message's data, taken only by the receive its clear-to-send named
//                  or, with bit 62 set, by the receive its grant named
//   bits 56-62  kind (control messages), below
//   bits 48-55  the message's number among the sender's ordered ones (below)
//   bits 40-47  credits the sender gives back (control messages; below)
//   bits 32-39  message class (unexpected messages)
//   bits 0-31   the BMI tag; for data, the sender's transfer id or the receiver's grant id
//
// A receive buffer takes any tag with bit 63 clear, and a kind this version does not know is
// dropped.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "support/keys/sealed_bulk.hpp"

namespace bmi::method::ofi {

enum class Kind : std::uint8_t {
    hello = 1,       // body: ofi_handshake.hpp's Hello (the initiator's endpoint name, ...)
    answer = 2,      // body: Answer; the acceptor knows the initiator's address now
    eager = 3,       // body: an expected message
    unexpected = 4,  // body: an unexpected message
    rts = 5,         // body: Rts
    cts = 6,         // body: Cts
    abort = 7,       // body: Abort; the sender cancelled a large send before its data left
    bye = 8,         // empty: the sender's instance is closing
    proof = 9,       // body: the initiator's proof of the key, before anything else it sends
    credit = 10,     // empty: only gives credits back
    grant = 11,      // body: Grant; a receive for the tag waits: its data may come at once
    revoke = 12,     // body: GrantId; the receive under that grant was cancelled
    unused = 13,     // body: GrantId; the answer to revoke: no data comes under that grant
    ping = 14,       // empty: answer with pong; the sender heard nothing from us lately
    pong = 15,       // empty: the answer to ping
    probe = 16,      // body: Probe (ofi_handshake.hpp): to a peer we looked up and wait on
    reset = 17,      // body: Reset; the answer to a probe from an endpoint we know nothing of
};
inline constexpr Kind last_kind = Kind::reset;

inline constexpr std::uint64_t data_bit = std::uint64_t{1} << 63;
// What a posted receive buffer ignores: everything but bit 63.
inline constexpr std::uint64_t control_ignore = ~data_bit;

constexpr std::uint64_t control_tag(Kind kind, std::uint32_t bmi_tag, std::uint8_t msg_class = 0) {
    return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 56) |
           (std::uint64_t{msg_class} << 32) | bmi_tag;
}
constexpr std::uint64_t data_tag(std::uint32_t transfer) { return data_bit | transfer; }
// Data under a grant: its own bit, so that a grant id never meets a sender's transfer id.
inline constexpr std::uint64_t grant_bit = std::uint64_t{1} << 62;
constexpr std::uint64_t grant_tag(std::uint32_t grant) { return data_bit | grant_bit | grant; }

// Credits: a peer may have this many eager, unexpected and RTS messages with us that we have
// not yet taken out of our receive buffers and said so; each such message costs the sender
// one, and every message it gets from us may give some back (bits 40-47). Both ends start
// with all of them after each handshake.
inline constexpr std::uint32_t peer_credits = 32;
constexpr bool costs_credit(Kind kind) {
    return kind == Kind::eager || kind == Kind::unexpected || kind == Kind::rts;
}
inline constexpr std::uint32_t most_credits_per_message = 255;
constexpr std::uint64_t with_credits(std::uint64_t tag, std::uint32_t credits) {
    return tag | (std::uint64_t{credits & 0xff} << 40);
}
constexpr std::uint32_t credits_of(std::uint64_t tag) {
    return (tag & data_bit) != 0 ? 0 : static_cast<std::uint32_t>((tag >> 40) & 0xff);
}

// Order: rxm moves a message above its own buffer size by a protocol of its own and may
// complete it after later small ones, so the messages whose order the receiver acts on carry a
// number, counted per peer from each handshake (mod 256), and the receiver takes them in that
// order (ofi_order.hpp). At most a few dozen are on their way at once (their credits, an abort
// per RTS, the bye), far fewer than the numbers.
constexpr bool numbered(Kind kind) {
    return kind == Kind::eager || kind == Kind::unexpected || kind == Kind::rts ||
           kind == Kind::abort || kind == Kind::bye;
}
constexpr std::uint64_t with_number(std::uint64_t tag, std::uint8_t number) {
    return tag | (std::uint64_t{number} << 48);
}
constexpr std::uint8_t number_of(std::uint64_t tag) { return static_cast<std::uint8_t>(tag >> 48); }

constexpr std::optional<Kind> kind_of(std::uint64_t tag) {
    if ((tag & data_bit) != 0) return std::nullopt;
    const auto k = static_cast<std::uint8_t>((tag >> 56) & 0x7f);
    if (k == 0 || k > static_cast<std::uint8_t>(last_kind)) return std::nullopt;
    return static_cast<Kind>(k);
}
constexpr std::uint32_t bmi_tag_of(std::uint64_t tag) { return static_cast<std::uint32_t>(tag); }
constexpr std::uint8_t class_of(std::uint64_t tag) { return static_cast<std::uint8_t>(tag >> 32); }

// A large message announced: its size, the transfer id its data will carry, and the size of
// the tagged sends it moves in (the last may be shorter), so that the receiver posts receives
// that each take one whole, whatever its own ofi_chunk_bytes. 0: the receiver's own.
struct Rts {
    std::uint64_t size;
    std::uint32_t transfer;
    std::uint32_t piece;
};
// The pieces a receiver takes: as ofi_chunk_bytes may be (ofi_settings.cpp).
inline constexpr std::uint32_t smallest_piece = 64 * 1024;
inline constexpr std::uint32_t largest_piece = 1024 * 1024 * 1024;
// The receiver's reply to an Rts: status 0, its data receives are posted; else the BMI error
// (negated) the receive ended with, and the sender fails with -BMI_EMSGSIZE.
struct Cts {
    std::uint32_t transfer;
    std::int32_t status;
};
struct Abort {
    std::uint32_t transfer;
    std::uint32_t reserved;
};
// A receive above the eager limit posted for the tag (in the control tag) is ready for up to
// `size` bytes under grant_tag(id). `seen` counts the expected messages (eager, RTS and data
// under grants) the receiver had taken from the sender: the sender uses the grant only if it
// had sent no more, so that none of its messages can still match that receive first.
struct Grant {
    std::uint64_t size;
    std::uint64_t seen;
    std::uint32_t id;
    std::uint32_t reserved;
};
struct GrantId {
    std::uint32_t id;
    std::uint32_t reserved;
};
// Grants a peer may have with us at once; more are not kept (their messages go by RTS).
inline constexpr std::size_t most_grants_per_peer = 64;

// An encrypted peer's large message moves in pieces of this many sealed chunks
// (support/keys/sealed_bulk.hpp), whatever ofi_chunk_bytes says: both ends cut its staging
// alike, and each piece opens on its own.
inline constexpr std::size_t sealed_chunks_per_piece = 4;
inline constexpr std::size_t sealed_piece_bytes = sealed_chunks_per_piece *
                                                  support::keys::sealed_chunk;

// Bodies are host-endian: both ends of a libfabric endpoint pair run the same provider on
// one kind of machine. A body of the wrong size decodes to nothing.
template <class Body>
std::optional<Body> decode(std::span<const std::byte> bytes) {
    if (bytes.size() != sizeof(Body)) return std::nullopt;
    Body body;
    std::memcpy(&body, bytes.data(), sizeof body);
    return body;
}

}  // namespace bmi::method::ofi
