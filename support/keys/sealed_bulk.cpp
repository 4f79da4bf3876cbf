// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/sealed_bulk.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace bmi::support::keys {

namespace {
// A message key seals one message's chunks, each under its own number: it never steps.
constexpr std::uint64_t bulk_never_steps = std::numeric_limits<std::uint64_t>::max();
}  // namespace

SealedBulk::SealedBulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
                       std::uint64_t total)
    : cipher_(cipher, message_key, bulk_never_steps), cookie_(cookie), total_(total) {}

std::array<std::uint8_t, 24> SealedBulk::header(std::uint64_t index) const {
    std::array<std::uint8_t, 24> h;
    std::memcpy(h.data(), &cookie_, 8);
    std::memcpy(h.data() + 8, &index, 8);
    std::memcpy(h.data() + 16, &total_, 8);
    return h;
}

void SealedBulk::seal(std::uint64_t index, const std::uint8_t* plain, std::uint8_t* sealed) {
    const std::uint64_t n = plain_size(index);
    std::uint8_t* chunk = sealed + sealed_offset(index);
    cipher_.seal_numbered(index, header(index), {plain, n}, chunk,
                          std::span<std::uint8_t, record_tag_size>(chunk + n, record_tag_size));
}

bool SealedBulk::open(std::uint64_t index, const std::uint8_t* sealed, std::uint8_t* out) {
    const std::uint64_t n = plain_size(index);
    const std::uint8_t* chunk = sealed + sealed_offset(index);
    return cipher_.open_numbered(
        index, header(index), {chunk, n}, out,
        std::span<const std::uint8_t, record_tag_size>(chunk + n, record_tag_size));
}

void seal_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::span<const std::span<const std::uint8_t>> pieces, std::uint64_t total,
               std::uint8_t* out) {
    SealedBulk bulk(cipher, message_key, cookie, total);
    std::size_t piece = 0, in_piece = 0;
    for (std::uint64_t index = 0; index < bulk.chunks(); ++index) {
        const std::uint64_t n = bulk.plain_size(index);
        std::uint8_t* chunk = out + SealedBulk::sealed_offset(index);
        // A chunk inside one piece seals straight from it; one across pieces is gathered first.
        while (piece < pieces.size() && in_piece == pieces[piece].size()) {
            ++piece;
            in_piece = 0;
        }
        if (piece < pieces.size() && pieces[piece].size() - in_piece >= n) {
            bulk.seal(index, pieces[piece].data() + in_piece, out);
            in_piece += n;
            continue;
        }
        for (std::uint64_t got = 0; got < n;) {
            const auto& p = pieces[piece];
            const std::uint64_t take = std::min<std::uint64_t>(p.size() - in_piece, n - got);
            std::memcpy(chunk + got, p.data() + in_piece, take);
            got += take;
            in_piece += take;
            if (in_piece == p.size()) {
                ++piece;
                in_piece = 0;
            }
        }
        bulk.seal(index, chunk, out);
    }
}

bool open_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::uint8_t* sealed, std::uint64_t total) {
    SealedBulk bulk(cipher, message_key, cookie, total);
    for (std::uint64_t index = 0; index < bulk.chunks(); ++index)
        if (!bulk.open(index, sealed)) return false;
    return true;
}

}  // namespace bmi::support::keys
