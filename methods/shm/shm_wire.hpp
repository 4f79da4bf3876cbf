// SPDX-License-Identifier: LGPL-2.1-or-later
// What two shm peers exchange: the connection hello over the Unix socket and the message headers
// that lead every message in a ring.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bmi-types.h"

namespace bmi::method::shm {

// Every ring message starts, after the ring's stamp, with a MsgHeader; `slots` is how many
// consecutive slots the message occupies, so the consumer can skip it without understanding the
// payload.
enum class MsgType : std::uint32_t {
    eager = 1,       // expected message, payload inline (size bytes)
    unexpected = 2,  // unexpected message, payload inline (size bytes); aux = its message
                     // class, 0..255 (BMI_post_sendunexpected_class), anything else is malformed
    rts = 3,         // large message announced: size = message bytes, aux = iovec count
    cts = 4,         // receiver wants DATA (two-copy path): size = offset to stream from
    data = 5,        // one chunk of a two-copy transfer: size = chunk bytes, in order
    done = 6,        // receiver finished reading the sender's memory (single copy)
    nak = 7,         // receiver refuses the message: aux = negative BMI error for the sender
    help = 8,        // receiver asks the sender to copy chunks too: a HelpInfo, then aux
                     // RemoteIovs of the receiver's buffer; cookie = the sender's
};

struct MsgHeader {
    std::uint32_t type;
    std::int32_t tag;
    std::uint32_t slots;
    std::int32_t aux;
    std::uint64_t size;
    std::uint64_t cookie;  // names one large transfer on one connection
};
static_assert(sizeof(MsgHeader) == 32);
// Where the payload starts in a message (the ring's claim/peek windows start after the stamp).
inline constexpr std::size_t header_size = sizeof(MsgHeader);

// The largest eager limit of any instance (each uses min(this, half its ring)): an EAGER
// record claiming more is malformed whatever the ring.
inline constexpr std::uint64_t max_eager_limit = 16 << 10;

// One piece of the sender's buffer, for process_vm_readv on the receiver side.
struct RemoteIov {
    std::uint64_t address;
    std::uint64_t length;
};
static_assert(sizeof(RemoteIov) == 16);

// What a HELP message carries before the receiver's iovecs (shm_split.hpp).
struct HelpInfo {
    std::uint32_t entry;       // index on the receiver's split board
    std::uint32_t generation;  // of that entry: claims for any other transfer fail
    std::uint64_t chunk_size;  // bytes per chunk (the last one may be shorter)
    std::uint32_t chunks;
    std::uint32_t reserved;
};
static_assert(sizeof(HelpInfo) == 24);

inline constexpr std::uint32_t hello_magic = 0x6c73686du;  // "mhsl"
// 2: messages carry their own stamp (shm_ring.hpp) instead of a head index; split copies.
// 3: shared-buffer offers and withdrawals on the socket (shm_region.hpp), counted in the
// segment header.
// 4: security keys: nonces in the hello and the reply, the acceptor's proof in the reply, the
// initiator's in a KeyProof after it (doc/security.md).
// 5: UNEXPECTED records carry the sender's message class in aux. A version-4 receiver would
// read it as nothing and deliver every class as 0, so the versions refuse each other.
// 6: doorbells (shm_doorbell.hpp): the hello and the reply carry the sender's doorbell memfd
// and the index the peer rings for this connection, and the per-ring consumer_sleeping flag
// is gone. A version-5 peer would never ring, so its messages would wait for the sweep.
// 7: each ring's control block has a third line, consumer_watches (shm_watched.hpp): a
// producer whose consumer polls the ring skips the doorbell. A version-6 peer would place the
// rings' controls elsewhere.
// 8: same-node tickets (methods/kit/same_node.hpp): the hello may show one, and the reply
// carries the acceptor's instance nonce, which a ticket's holder checks.
// 9: the hello and the reply state the sender's unexpected limit; its peer sends it no
// unexpected message above that and fails such a send with -BMI_EMSGSIZE.
inline constexpr std::uint32_t protocol_version = 9;
// The unexpected limit of an instance that sets none. Until the reply tells an initiator the
// acceptor's limit, its unexpected messages up to this size go at once (larger ones wait for
// the reply), so an acceptor takes that much from its initiators whatever its own limit.
inline constexpr bmi_size_t default_unexpected_limit = 16 * 1024;
// The most a hello or reply may state (the unexpected_limit setting's range).
inline constexpr std::uint64_t max_stated_unexpected_limit = 1ull << 30;
// Connections one instance can have at once (indices of its doorbell): 8 KiB of bits.
inline constexpr std::uint32_t doorbell_capacity = 1u << 16;
// Hello and HelloReply features: the sender holds a security key, and key_nonce is its nonce.
inline constexpr std::uint32_t feature_key_proof = 1u << 0;
// With feature_key_proof: proofs bind the acceptor's socket as each side sees it
// (methods/kit/key_exchange.hpp). A keyed peer without it speaks the first key handshake.
inline constexpr std::uint32_t feature_key_binding = 1u << 1;
// Hello: `ticket` is a same-node ticket the acceptor's tcp side handed out (a hello to a
// same-node listener must show one).
inline constexpr std::uint32_t feature_same_node_ticket = 1u << 2;
inline constexpr std::size_t key_bytes = 32;  // nonces and proofs (support/keys)
inline constexpr std::size_t max_name_length = 64;

// Sent by the connecting side together with three descriptors: the segment memfd, its
// eventfd, its doorbell memfd.
struct Hello {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t slot_count;
    std::uint32_t slot_size;
    std::int32_t pid;
    std::uint32_t name_length;  // 0: the connecting instance does not listen
    std::uint64_t nonce;        // tells instances of one process apart (reconnects)
    char name[max_name_length];
    std::uint32_t features;
    std::uint32_t doorbell_index;       // the acceptor rings this bit of our doorbell
    std::uint8_t key_nonce[key_bytes];  // with feature_key_proof, else zero
    std::uint8_t ticket[key_bytes];     // with feature_same_node_ticket, else zero
    std::uint64_t unexpected_limit;     // the sender's, 1 byte to max_stated_unexpected_limit
};

// The acceptor's answer, with two descriptors: its eventfd, its doorbell memfd.
struct HelloReply {
    std::uint32_t magic;
    std::uint32_t version;
    std::int32_t pid;
    std::int32_t status;  // 0, or a negative BMI error (-BMI_EACCES: a key is required) and
                          // no descriptor
    std::uint32_t features;
    std::uint32_t doorbell_index;       // the initiator rings this bit of our doorbell
    std::uint8_t key_nonce[key_bytes];  // with feature_key_proof: the acceptor's nonce
    std::uint8_t key_proof[key_bytes];  // and its proof
    std::uint64_t nonce;                // the acceptor's instance nonce (Hello::nonce)
    std::uint64_t unexpected_limit;     // as Hello's
};

// A keyed initiator's proof, the first thing on the socket after the reply. Until it checks the
// acceptor creates no peer and reads nothing from the rings.
struct KeyProof {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint8_t proof[key_bytes];
};

// Ring geometry limits; both sides check them before trusting a peer's numbers.
inline constexpr std::uint32_t min_slot_count = 4;
inline constexpr std::uint32_t max_slot_count = 4096;
inline constexpr std::uint32_t min_slot_size = 256;
inline constexpr std::uint32_t max_slot_size = 1u << 20;

// [A-Za-z0-9._-]+ with an optional ":PORT" (0..65535), 64 characters at most. The port form
// is the one Mercury's na_bmi builds for every protocol ("shm://host:port").
inline bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > max_name_length) return false;
    const std::size_t colon = name.find(':');
    const std::string_view base = name.substr(0, colon);
    if (base.empty()) return false;
    for (char c : base) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) return false;
    }
    if (colon == std::string_view::npos) return true;
    const std::string_view port = name.substr(colon + 1);
    if (port.empty() || port.size() > 5) return false;
    unsigned value = 0;
    for (char c : port) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    return value <= 65535;
}

// The port of a "NAME:PORT" name, or -1 for a name without one.
inline int name_port(std::string_view name) {
    const std::size_t colon = name.rfind(':');
    if (colon == std::string_view::npos) return -1;
    int value = 0;
    for (char c : name.substr(colon + 1)) value = value * 10 + (c - '0');
    return value;
}

// Both powers of two, so ring positions wrap with a mask and slot arithmetic needs no division.
inline bool valid_geometry(std::uint32_t slot_count, std::uint32_t slot_size) {
    return slot_count >= min_slot_count && slot_count <= max_slot_count &&
           slot_size >= min_slot_size && slot_size <= max_slot_size &&
           std::has_single_bit(slot_count) && std::has_single_bit(slot_size);
}

}  // namespace bmi::method::shm
