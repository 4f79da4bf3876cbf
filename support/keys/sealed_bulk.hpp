// SPDX-License-Identifier: LGPL-2.1-or-later
// One large message sealed apart from its connection's records (doc/security.md): verbs reads
// it by RDMA and ofi moves it in chunks of its own size, in any order, so it is cut into
// 64 KiB chunks under a key of that message's own, each chunk's number its nonce's counter
// and {cookie, number, total} its associated data.
#pragma once

#include <cstdint>
#include <span>

#include "support/keys/record_cipher.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::support::keys {

// Plaintext bytes of one sealed chunk.
inline constexpr std::uint64_t bulk_chunk = 64 * 1024;
// Bytes a payload of `plain` bytes takes sealed: every chunk carries its tag.
constexpr std::uint64_t sealed_size(std::uint64_t plain) {
    return plain + (plain / bulk_chunk + (plain % bulk_chunk != 0 ? 1 : 0)) * record_tag_size;
}

// Seals the `total` bytes gathered from `pieces` into `out` (sealed_size(total) bytes): chunk i
// is its ciphertext then its tag, and its header the message's cookie, i and total.
void seal_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::span<const std::span<const std::uint8_t>> pieces, std::uint64_t total,
               std::uint8_t* out);
// Opens what seal_bulk made, in place: chunk i's plaintext stays at i * (bulk_chunk + tag).
// False if any chunk fails; then none of it may be used.
bool open_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::uint8_t* sealed, std::uint64_t total);
// The plaintext of an opened payload, chunk by chunk: visit(bytes, offset in the message).
template <class Visit>
void for_each_opened_chunk(const std::uint8_t* sealed, std::uint64_t total, Visit&& visit) {
    for (std::uint64_t index = 0, done = 0; done < total; ++index) {
        const std::uint64_t n = total - done < bulk_chunk ? total - done : bulk_chunk;
        visit(std::span<const std::uint8_t>(sealed + index * (bulk_chunk + record_tag_size), n),
              done);
        done += n;
    }
}

}  // namespace bmi::support::keys
