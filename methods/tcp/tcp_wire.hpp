// SPDX-License-Identifier: LGPL-2.1-or-later
// The tcp wire format as pure functions: the two legacy framings (OrangeFS's 24-byte header,
// the standalone BMI library's 25-byte one), libbmi's v2 header and the HELLO body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bmi-types.h"
#include "methods/kit/same_node.hpp"
#include "support/keys/key_proof.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::method::tcp {

inline constexpr std::uint32_t wire_magic = 51903;
// The standalone BMI library's tcp framing (radix-io/bmi, as Mercury's bmi plugin uses it):
// the OrangeFS modes and limits under this magic, in a 25-byte header.
inline constexpr std::uint32_t standalone_magic = 51912;
// HELLO and HELLO_ACK carry their own magic ("BMIH" on the wire). An OrangeFS acceptor checks
// only the magic, never the mode: a HELLO under wire_magic looked like a message to it and left
// a failed receive behind. Under this magic it drops the connection before creating anything,
// and the client falls back to legacy framing.
inline constexpr std::uint32_t hello_magic = 0x48494D42;
// A keyless libbmi client sends OrangeFS frames from the first byte, with this value in the
// upper half of the 64-bit tag field: an offer to upgrade. OrangeFS keeps only the low 32 bits
// of the field, and writes the upper half as a sign extension (0 or 0xFFFFFFFF), which this is
// neither of; a libbmi acceptor that sees it on the first frame answers HELLO_ACK.
inline constexpr std::uint32_t upgrade_offer_mark = 0x32494D42;  // "BMI2" on the wire

// Frame modes. The first three are all a legacy peer knows; the rest exist only after HELLO_ACK
// (or, for HELLO itself, as the one frame a libbmi client risks sending to an unknown acceptor).
enum class Mode : std::uint32_t {
    unexpected = 0x2,
    eager = 0x4,
    rendezvous = 0x8,     // legacy only: the whole payload follows the header
    rts = 0x10,           // v2: large message announced, no payload
    cts = 0x20,           // v2: receiver matched the RTS with cookie
    nak = 0x40,           // v2: receiver's buffer is too small for the RTS with cookie
    data = 0x80,          // v2: one chunk of a cleared rendezvous transfer
    grant = 0x200,        // v2 with feature_grants: the receiver reserved room for one message
    hello = 0x100,        // under hello_magic
    hello_ack = 0x101,    // under hello_magic
    hello_proof = 0x102,  // under hello_magic: the initiator's key proof, after HELLO_ACK
};

inline constexpr std::size_t legacy_header_size = 24;
inline constexpr std::size_t standalone_header_size = 25;
inline constexpr std::size_t v2_header_size = 32;
inline constexpr std::size_t max_header_size = v2_header_size;

inline constexpr bmi_size_t eager_limit = 16 * 1024;  // legacy: what OrangeFS sends eagerly
// Between libbmi peers an eager message saves the RTS/CTS round trip; 64 KiB keeps the memory an
// unmatched eager message can pin small while covering typical PVFS request/response sizes.
inline constexpr bmi_size_t v2_eager_limit = 64 * 1024;
// With feature_large_eager on both sides. A ping-pong of 128-512 KiB spent a third to a half of
// its time in the RTS/CTS round trip (0.53-0.57x a raw TCP ping-pong); sent eagerly, a message
// whose receive is posted is read straight into it, and one without waits under the early-data
// budget like any eager message. Above this size the round trip is a few percent of the
// transfer, and rendezvous keeps what an unmatched message can make the receiver hold small.
inline constexpr bmi_size_t v2_large_eager_limit = 512 * 1024;
inline constexpr bmi_size_t legacy_message_limit = 16 * 1024 * 1024;
inline constexpr bmi_size_t data_chunk_limit = 1024 * 1024;
inline constexpr bmi_size_t default_unexpected_limit = 16 * 1024;

inline constexpr std::uint64_t protocol_version = 1;
inline constexpr std::uint64_t feature_rendezvous = 1u << 0;
// The sender holds a security key: the 32 reserved bytes of its HELLO or HELLO_ACK are its
// nonce, and a HELLO_ACK carries its proof after them (doc/security.md). Keyless peers leave
// the bit and the bytes zero, exactly as before keys existed.
inline constexpr std::uint64_t feature_key_proof = 1u << 1;
// HELLO_ACK only: this acceptor admits only peers that prove its key, and the HELLO offered
// none; the connection closes after it.
inline constexpr std::uint64_t feature_key_required = 1u << 2;
// The sender takes EAGER frames up to v2_large_eager_limit. Both sides must announce it for
// either to send them; an older libbmi peer never sees one.
inline constexpr std::uint64_t feature_large_eager = 1u << 3;
// The sender takes GRANT frames and EAGER frames sent under them (doc/methods/tcp.md,
// "Grants"). Both sides must announce it for either to send one.
inline constexpr std::uint64_t feature_grants = 1u << 4;
// With feature_key_proof: the sender's proofs bind the acceptor's endpoint as each side sees
// it (methods/kit/key_exchange.hpp). A keyed peer without it speaks the first key handshake,
// whose proofs could be reflected, and is refused.
inline constexpr std::uint64_t feature_key_binding = 1u << 5;
// With feature_key_proof: the sender's proofs cover the cipher fields (issue 39), which its
// HELLO or HELLO_ACK carries after the nonce: one byte of cipher bits (a HELLO's offer, a
// HELLO_ACK's choice: one bit, or none for plain traffic) and a 32-byte ephemeral X25519 key
// (zero when the byte is). A keyed peer without it proves an older transcript and is refused.
inline constexpr std::uint64_t feature_key_ciphers = 1u << 6;
// HELLO: the sender is on this node's side of a same-node lookup (methods/kit/same_node.hpp)
// and asks for an offer; it closes after the answer and sends no message. HELLO_ACK: the offer
// follows, last in the body (same_node_offer_size bytes). An acceptor with no offer to make
// answers without the bit.
inline constexpr std::uint64_t feature_same_node = 1u << 7;
// The upper half of the features word is the sender's unexpected limit (1 byte to 1 GiB): its
// peer sends it no UNEXPECTED frame above that, and fails such a send with -BMI_EMSGSIZE
// rather than have it dropped with the connection. An older libbmi ignores the unknown bits.
// When both hellos state a limit, both proofs bind both hellos' features (hello_terms).
inline constexpr std::uint64_t feature_unexpected_limit = 1u << 8;
inline std::uint64_t stating_unexpected_limit(std::uint64_t features, bmi_size_t limit) {
    return features | feature_unexpected_limit | static_cast<std::uint64_t>(limit) << 32;
}
// The limit a hello's features state; 0 if they state none (or an impossible 0).
inline bmi_size_t stated_unexpected_limit(std::uint64_t features) {
    return (features & feature_unexpected_limit) != 0 ? static_cast<bmi_size_t>(features >> 32) : 0;
}
// What the proofs of a handshake whose hellos both state a limit bind of them: both features
// words whole, so that nobody on the path changes a limit or strips a bit (large EAGER, GRANTs).
std::string hello_terms(std::uint64_t initiator_features, std::uint64_t acceptor_features);
// The offer block: name length (u8), the shm listener name padded to 64 bytes, the listener's
// instance nonce (u64), the ticket.
inline constexpr std::size_t same_node_name_room = 64;
inline constexpr std::size_t same_node_offer_size = 1 + same_node_name_room + 8 + kit::ticket_size;
// What every HELLO and HELLO_ACK of ours announces (the key bits are added where they apply).
inline constexpr std::uint64_t our_features = feature_rendezvous | feature_large_eager |
                                              feature_grants;
// The largest EAGER frame a v2 connection carries, given the peer's announced features.
inline bmi_size_t v2_eager_limit_for(std::uint64_t peer_features) {
    return (peer_features & feature_large_eager) != 0 ? v2_large_eager_limit : v2_eager_limit;
}
// A GRANT reserves room for one EAGER frame of up to its size (more than the connection's
// eager limit) whether or not a receive is posted for it when it lands, so a message whose
// receive is already posted skips the RTS/CTS round trip. The receiver keeps at most
// max_grants_per_connection outstanding on a connection, each at most grant_size_limit; a
// peer that holds more, or sends past one, is out of step.
inline constexpr bmi_size_t grant_size_limit = 16 * 1024 * 1024;
inline constexpr std::size_t max_grants_per_connection = 4;
inline constexpr std::size_t hello_reserved_size = support::keys::nonce_size;
inline constexpr std::size_t hello_fixed_size = 8 + 2 + hello_reserved_size;
inline constexpr std::size_t hello_cipher_size = 1 + support::keys::public_key_size;
inline constexpr std::size_t hello_max_body = hello_fixed_size + BMI_MAX_ADDR_LEN +
                                              hello_cipher_size + support::keys::proof_size +
                                              same_node_offer_size;

// How the headers of one connection are laid out (doc/methods/tcp.md, "Legacy frames").
enum class Framing : std::uint8_t {
    orangefs,    // 24 bytes: magic, mode, u64 tag, size; also the layout of every HELLO frame
    standalone,  // 25 bytes: magic, mode, u32 tag, u32 address hash, size, message class
    v2,          // 32 bytes: the OrangeFS fields and a cookie (an UNEXP's message class)
};

struct Header {
    std::uint32_t magic = wire_magic;
    Mode mode = Mode::eager;
    std::uint64_t tag = 0;  // legacy peers write the int32 tag sign-extended
    std::uint64_t size = 0;
    // v2 only. An UNEXP frame names no transfer, so its cookie carries the message class; a
    // decoded one keeps the whole field, which check_header bounds to a byte. An EAGER frame's
    // is 0, or the GRANT it is sent under.
    std::uint64_t cookie = 0;
    // standalone only: a hash of the sender's listen address. An unproven claim: libbmi sends
    // 0 (no identity) and never routes by a received one.
    std::uint32_t address_hash = 0;
    // The sender's class of an UNEXP frame (standalone: byte 24; v2: the cookie); 0 otherwise
    // and always 0 from an OrangeFS peer, whose header has no room for it.
    std::uint8_t msg_class = 0;
};

// Which frames a connection may receive next; decides both header size and legal modes.
enum class Dialect : std::uint8_t {
    first_inbound,  // accepted socket, nothing read yet: HELLO or any legacy frame
    await_ack,      // we sent HELLO: only HELLO_ACK is legal
    await_proof,    // we answered a keyed HELLO: only the initiator's HELLO_PROOF is legal
    legacy,         // OrangeFS framing for the rest of the connection: only magic 51903
    standalone,     // standalone framing for the rest of the connection: only magic 51912
    v2,             // libbmi framing after the handshake
    offering,       // we send marked OrangeFS frames: the acceptor's first frame is HELLO_ACK
                    // (a libbmi acceptor) or an OrangeFS frame (anyone else)
    await_hello,    // we answered an offer with HELLO_ACK: OrangeFS frames until its HELLO
};

std::size_t header_size(Framing f);
inline std::uint32_t magic_of(Framing f) {
    return f == Framing::standalone ? standalone_magic : wire_magic;
}
// How many header bytes a connection in dialect d needs, given the `have` bytes read so far.
// Only a first inbound frame depends on them: its first 24 bytes are read (the OrangeFS and
// HELLO size), and under the standalone magic one more byte follows.
std::size_t header_bytes_needed(Dialect d, std::span<const std::uint8_t> have);
// The layout of a complete header of header_bytes_needed(d, ...) bytes.
Framing framing_of(Dialect d, std::span<const std::uint8_t> head);

inline bmi_msg_tag_t tag_of(const Header& h) {
    return static_cast<bmi_msg_tag_t>(static_cast<std::uint32_t>(h.tag));
}
inline std::uint64_t wire_tag(bmi_msg_tag_t tag) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(tag));
}
// The tag field of a frame that carries the upgrade offer.
inline std::uint64_t offer_tag(bmi_msg_tag_t tag) {
    return std::uint64_t{upgrade_offer_mark} << 32 | static_cast<std::uint32_t>(tag);
}
inline bool offers_upgrade(const Header& h) { return h.tag >> 32 == upgrade_offer_mark; }

// Writes h in little-endian order with layout f; returns header_size(f). The magic is h's.
std::size_t encode_header(const Header& h, Framing f, std::uint8_t* out);
// Reads a header of header_size(f) bytes; does not validate.
Header decode_header(const std::uint8_t* in, Framing f);
// 0 if h may arrive in dialect d, else -BMI_EPROTO. Checks magic, mode and every size bound so
// that nothing is ever allocated from an unchecked header. HELLO and HELLO_ACK need hello_magic;
// a first inbound HELLO may also come under wire_magic, from a libbmi client older than it.
// The offering and await_hello dialects take OrangeFS frames, and HELLO_ACK or HELLO. A
// first inbound legacy frame may carry either legacy magic; afterwards only its own is legal.
// v2_eager: the connection's EAGER bound (v2_eager_limit_for the peer's features).
int check_header(const Header& h, Dialect d, bmi_size_t unexpected_limit,
                 bmi_size_t v2_eager = v2_eager_limit);

struct Hello {
    Hello() = default;
    Hello(std::uint64_t features_, std::string address_)
        : features(features_), address(std::move(address_)) {}

    std::uint64_t features = 0;
    std::string address;                        // sender's listen address, may be empty
    support::keys::Nonce nonce{};               // with feature_key_proof; else zero
    std::optional<support::keys::Proof> proof;  // HELLO_ACK with feature_key_proof
    // With feature_key_ciphers: the cipher offer (HELLO) or choice (HELLO_ACK), and the
    // sender's ephemeral public key when that is not 0.
    std::uint8_t ciphers = 0;
    support::keys::PublicKey public_key{};
    // HELLO_ACK with feature_same_node: the acceptor's offer.
    std::optional<kit::SameNodeOffer> offer;
};

// A complete HELLO or HELLO_ACK frame: legacy-layout header plus body. magic is hello_magic,
// except for a HELLO_ACK answering an older libbmi client that sent its HELLO under wire_magic.
std::vector<std::uint8_t> encode_hello(const Hello& hello, bool ack,
                                       std::uint32_t magic = hello_magic);
// Parses a body whose length the header gave; nullopt if inconsistent.
std::optional<Hello> decode_hello_body(std::span<const std::uint8_t> body);
// The address as encode_hello puts it on the wire (at most BMI_MAX_ADDR_LEN bytes): what both
// sides of a handshake bind into their proofs.
std::string hello_address(std::string_view address);

// A complete HELLO_PROOF frame: legacy-layout header under hello_magic, then the proof.
std::vector<std::uint8_t> encode_hello_proof(const support::keys::Proof& proof);

}  // namespace bmi::method::tcp
