// SPDX-License-Identifier: LGPL-2.1-or-later
// What travels between two verbs instances: the bootstrap HELLO on the TCP socket, and the
// header at the front of every SEND on the queue pair. Both ends run libbmi on hosts of the
// same byte order (checked by the magic in HELLO); fields are fixed width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bmi-types.h"

namespace bmi::method::verbs {

inline constexpr std::uint32_t hello_magic = 0x42564231;  // "BVB1", also a byte-order check
// 2: the server counts a connection ready only once a SEND has come over the queue pair.
// 3: HELLO carries a features word, a nonce and a proof for the security key (issue 16).
// 4: UNEXPECTED carries its message class in the header. A version-3 peer would ignore the
// byte and hand every class out as 0, so the versions refuse each other.
// 5: HELLO carries the cipher offer or choice and an ephemeral public key (issue 39), and with
// a cipher chosen every SEND is a record (verbs_records.hpp).
// 6: HELLO states the sender's unexpected limit; its peer sends it no unexpected message above
// that and fails such a send with -BMI_EMSGSIZE.
inline constexpr std::uint16_t protocol_version = 6;
// Payload bytes of one eager buffer; the unexpected limit is capped at this, so an unexpected
// message is always a single SEND.
inline constexpr std::uint32_t eager_payload = 16 * 1024;
inline constexpr bmi_size_t default_unexpected_limit = 16 * 1024;
inline constexpr std::uint32_t max_name = 255;

// Hello::features bits.
inline constexpr std::uint32_t feature_key_proof = 1;     // the sender holds a key: nonce (and,
                                                          // from the server, proof) are set
inline constexpr std::uint32_t feature_key_required = 2;  // server: a keyless client is refused;
                                                          // nothing else in this HELLO is valid
// With feature_key_proof: proofs bind the bootstrap socket's server end as each side sees it
// (methods/kit/key_exchange.hpp). A keyed peer without it speaks the first key handshake.
inline constexpr std::uint32_t feature_key_binding = 4;
// With feature_key_proof: the proofs cover `ciphers` and `public_key` (doc/security.md). A
// keyed peer without it proves another transcript and is refused as an older handshake.
inline constexpr std::uint32_t feature_key_ciphers = 8;
inline constexpr std::size_t key_field = 32;  // bytes of a nonce, a proof or a public key

// Sent once in each direction on the bootstrap socket. The client sends first; the server
// answers after its QP is in RTR, and the client then sends one ready byte after reaching RTS,
// so neither side posts a SEND before the other can receive it. The client's first SEND on the
// queue pair (a CREDIT if it has nothing else to say) is what makes the server count the
// connection ready: bytes on a TCP socket prove nothing about a queue pair.
struct Hello {
    std::uint32_t magic = hello_magic;
    std::uint16_t version = protocol_version;
    std::uint16_t name_length = 0;  // bytes of name used: the sender's listen address or "";
                                    // unproven, so it only goes to the log and routes nothing
    std::uint32_t qp_num = 0;
    std::uint32_t psn = 0;
    std::uint16_t lid = 0;
    std::uint8_t mtu = 0;  // enum ibv_mtu of the sender's port
    std::uint8_t reserved = 0;
    std::uint32_t credits = 0;        // eager messages the sender of HELLO can take from us
    std::uint32_t eager_payload = 0;  // must equal ours
    std::uint8_t gid[16] = {};
    char name[max_name + 1] = {};
    std::uint32_t features = 0;
    std::uint8_t nonce[key_field] = {};  // the sender's fresh nonce, with feature_key_proof
    std::uint8_t proof[key_field] = {};  // server only: its proof (support/keys/key_proof.hpp)
    // With feature_key_ciphers: the client's offer or the server's choice (cipher bits,
    // support/keys/traffic_keys.hpp) and, with any, the sender's ephemeral X25519 key.
    std::uint8_t ciphers = 0;
    std::uint8_t reserved_after_ciphers[3] = {};
    std::uint8_t public_key[key_field] = {};
    std::uint32_t unexpected_limit = 0;  // the sender's: 1 byte to eager_payload
};
// A HELLO's magic and version come first, so a peer of another version is told apart before
// the rest of its (differently sized) HELLO arrives.
inline constexpr std::size_t hello_version_end = 6;
inline constexpr char ready_byte = 'R';

// With a key both sides hold, the bootstrap runs (doc/security.md):
//   client -> HELLO     (its nonce)                 both QPs stay in INIT
//   server -> HELLO     (its nonce, its proof)
//   client -> KeyProof  after checking the server's proof; its QP goes to RTR/RTS
//   server -> ready_byte after checking the client's proof; its QP goes to RTR/RTS, and the
//                       client's first SEND then makes the connection ready as without a key.
struct KeyProof {
    std::uint8_t proof[key_field] = {};
};

enum class MsgType : std::uint8_t {
    eager = 1,       // tag, size, payload follows the header
    unexpected = 2,  // the same, delivered through BMI_testunexpected; msg_class is set
    rts = 3,         // rendezvous: size, cookie, seg_count RemoteSegments follow the header
    fin = 4,         // cookie: the receiver is done with the sender's memory; status
    cancel = 5,      // cookie: the sender cancelled an RTS; the receiver answers with FIN
    credit = 6,      // only returns credits; costs no credit itself
};

enum class FinStatus : std::uint32_t { ok = 0, cancelled = 1, too_long = 2, failed = 3 };

struct MsgHeader {
    std::uint8_t type = 0;
    // UNEXPECTED: the class BMI_post_sendunexpected_class gave it (0 from OrangeFS's API);
    // every value is a class. 0 and ignored on every other type.
    std::uint8_t msg_class = 0;
    std::uint16_t credits = 0;  // eager buffers the sender of this message has freed for us
    std::uint32_t seg_count = 0;
    std::int32_t tag = 0;
    std::uint32_t status = 0;
    std::uint64_t size = 0;
    std::uint64_t cookie = 0;
};
static_assert(sizeof(MsgHeader) == 32);

// One piece of the sender's memory an RTS offers for RDMA READ.
struct RemoteSegment {
    std::uint64_t addr = 0;
    std::uint64_t length = 0;
    std::uint32_t rkey = 0;
    std::uint32_t reserved = 0;
};
static_assert(sizeof(RemoteSegment) == 24);

// With encryption a SEND also carries its record's 16-byte tag.
inline constexpr std::uint32_t buffer_size = sizeof(MsgHeader) + eager_payload + 16;
// Segments an RTS can carry in one eager buffer; longer send lists are packed (verbs_send.cpp).
inline constexpr std::uint32_t max_rts_segments = 64;

// What a HELLO says about its sender for the key proof's transcript: its listen address and
// the queue pair the other side will connect to (verbs_key_handshake.cpp).
std::string endpoint_text(const Hello& h);

}  // namespace bmi::method::verbs
