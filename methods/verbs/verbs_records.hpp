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
#include "support/keys/sealed_bulk.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::method::verbs {

using support::keys::record_tag_size;

// Rendezvous data is sealed as support/keys/sealed_bulk.hpp says.
using support::keys::bulk_chunk;
using support::keys::open_bulk;
using support::keys::seal_bulk;
using support::keys::sealed_size;

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
