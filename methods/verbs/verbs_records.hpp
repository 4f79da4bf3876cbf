// SPDX-License-Identifier: LGPL-2.1-or-later
// One verbs connection's encryption (doc/security.md, "verbs"). Every SEND after the handshake
// is a record: its MsgHeader authenticated as it is, its payload encrypted, its tag after it in
// the same SEND. RC delivers one queue pair's SENDs in order and the receiver opens them in
// completion order, so the direction's counter nonce (RecordCipher) holds. Rendezvous data is
// read by RDMA in any order, so it is sealed apart: in chunks under a key of its own per message
// (the RTS cookie names it), each chunk's number as its nonce counter.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "support/keys/record_cipher.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::method::verbs {

using support::keys::record_tag_size;

// Plaintext bytes of one sealed chunk of rendezvous data.
inline constexpr std::uint64_t bulk_chunk = 64 * 1024;
// Bytes a rendezvous payload of `plain` bytes takes sealed: every chunk carries its tag.
constexpr std::uint64_t sealed_size(std::uint64_t plain) {
    return plain + (plain / bulk_chunk + (plain % bulk_chunk != 0 ? 1 : 0)) * record_tag_size;
}

// Seals the `total` bytes gathered from `pieces` into `out` (sealed_size(total) bytes): chunk i
// is its ciphertext then its tag, and its header the message's cookie, i and total.
void seal_bulk(support::keys::Cipher cipher, const support::keys::DirectionKey& message_key,
               std::uint64_t cookie, std::span<const std::span<const std::uint8_t>> pieces,
               std::uint64_t total, std::uint8_t* out);
// Opens what seal_bulk made, in place: chunk i's plaintext stays at i * (bulk_chunk + tag).
// False if any chunk fails; then none of it may be used.
bool open_bulk(support::keys::Cipher cipher, const support::keys::DirectionKey& message_key,
               std::uint64_t cookie, std::uint8_t* sealed, std::uint64_t total);

class VerbsRecords {
public:
    // `initiator`: we made the connection (the bootstrap client).
    VerbsRecords(const support::keys::TrafficKeys& keys, bool initiator,
                 std::uint64_t rekey_interval);

    support::keys::Cipher cipher() const { return send_.cipher(); }
    // Seals the message of `length` bytes at `message` (its MsgHeader first) in place and
    // writes its tag after it; the room must be there. The length to send.
    std::uint32_t seal(std::uint8_t* message, std::uint32_t length);
    // Opens a received message in place: its plaintext length, or nothing if it fails (and
    // then every later one does too: the connection must close).
    std::optional<std::uint32_t> open(std::uint8_t* message, std::uint32_t length);
    // The key of one rendezvous payload we send, or one we receive, by its cookie.
    support::keys::DirectionKey send_bulk_key(std::uint64_t cookie) const;
    support::keys::DirectionKey recv_bulk_key(std::uint64_t cookie) const;
    std::uint64_t sent() const { return send_.records(); }
    std::uint64_t opened() const { return recv_.records(); }
    std::uint64_t keys_used() const { return send_.keys_used() + recv_.keys_used(); }

private:
    support::keys::RecordCipher send_;
    support::keys::RecordCipher recv_;
    // Each direction's first key, from which only subkeys for rendezvous data are made.
    support::keys::DirectionKey send_base_;
    support::keys::DirectionKey recv_base_;
};

}  // namespace bmi::method::verbs
