// SPDX-License-Identifier: LGPL-2.1-or-later
// One large message sealed apart from its connection's records (doc/security.md): verbs reads
// it by RDMA and ofi moves it in pieces of its own size, in any order, so it is cut into
// 64 KiB chunks under a key of that message's own, each chunk's number its nonce's counter
// and {cookie, number, total} its associated data.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "support/keys/record_cipher.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::support::keys {

// Plaintext bytes of one sealed chunk, and the bytes it takes sealed with its tag.
inline constexpr std::uint64_t bulk_chunk = 64 * 1024;
inline constexpr std::uint64_t sealed_chunk = bulk_chunk + record_tag_size;
// Bytes a payload of `plain` bytes takes sealed: every chunk carries its tag.
constexpr std::uint64_t sealed_size(std::uint64_t plain) {
    return plain + (plain / bulk_chunk + (plain % bulk_chunk != 0 ? 1 : 0)) * record_tag_size;
}

// One message's chunks, sealed or opened one at a time and in any order: a sender may post
// each as soon as it is sealed, a receiver open each as soon as it has come.
class SealedBulk {
public:
    SealedBulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::uint64_t total);
    std::uint64_t total() const { return total_; }
    std::uint64_t chunks() const { return (total_ + bulk_chunk - 1) / bulk_chunk; }
    // Chunk `index`'s plaintext bytes, and where it starts in the plaintext.
    std::uint64_t plain_size(std::uint64_t index) const {
        const std::uint64_t start = index * bulk_chunk;
        return start >= total_ ? 0 : (total_ - start < bulk_chunk ? total_ - start : bulk_chunk);
    }
    static std::uint64_t plain_offset(std::uint64_t index) { return index * bulk_chunk; }
    // Chunk `index` sealed, at `sealed` + index * sealed_chunk: its ciphertext then its tag.
    static std::uint64_t sealed_offset(std::uint64_t index) { return index * sealed_chunk; }
    // The chunks [first, end) whose sealed bytes lie in [offset, offset + length) of `sealed`
    // (offset a multiple of sealed_chunk).
    struct Range {
        std::uint64_t first;
        std::uint64_t end;
    };
    static Range sealed_chunks(std::uint64_t offset, std::uint64_t length) {
        return {offset / sealed_chunk, (offset + length + sealed_chunk - 1) / sealed_chunk};
    }
    // Seals chunk `index` from `plain` (plain_size(index) bytes, which may be the chunk's own
    // place in `sealed`) into its place in `sealed`.
    void seal(std::uint64_t index, const std::uint8_t* plain, std::uint8_t* sealed);
    // Opens chunk `index` of `sealed` in place; false if it fails, and then its bytes are wiped.
    bool open(std::uint64_t index, std::uint8_t* sealed) {
        return open(index, sealed, sealed + sealed_offset(index));
    }
    // Opens chunk `index` of `sealed` into `out` (plain_size(index) bytes, wiped if it fails).
    bool open(std::uint64_t index, const std::uint8_t* sealed, std::uint8_t* out);

private:
    std::array<std::uint8_t, 24> header(std::uint64_t index) const;
    RecordCipher cipher_;
    std::uint64_t cookie_;
    std::uint64_t total_;
};

// Seals the `total` bytes gathered from `pieces` into `out` (sealed_size(total) bytes).
void seal_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::span<const std::span<const std::uint8_t>> pieces, std::uint64_t total,
               std::uint8_t* out);
// Opens what seal_bulk made, in place: chunk i's plaintext stays at i * sealed_chunk.
// False if any chunk fails; then none of it may be used.
bool open_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::uint8_t* sealed, std::uint64_t total);
// The plaintext of an opened payload, chunk by chunk: visit(bytes, offset in the message).
template <class Visit>
void for_each_opened_chunk(const std::uint8_t* sealed, std::uint64_t total, Visit&& visit) {
    for (std::uint64_t index = 0, done = 0; done < total; ++index) {
        const std::uint64_t n = total - done < bulk_chunk ? total - done : bulk_chunk;
        visit(std::span<const std::uint8_t>(sealed + index * sealed_chunk, n), done);
        done += n;
    }
}

}  // namespace bmi::support::keys
