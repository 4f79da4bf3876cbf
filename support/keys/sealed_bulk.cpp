// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/sealed_bulk.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

namespace bmi::support::keys {

namespace {

// A message key seals one message's chunks, counted from 0: it never needs a step.
constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

std::array<std::uint8_t, 24> chunk_header(std::uint64_t cookie, std::uint64_t index,
                                          std::uint64_t total) {
    std::array<std::uint8_t, 24> h;
    std::memcpy(h.data(), &cookie, 8);
    std::memcpy(h.data() + 8, &index, 8);
    std::memcpy(h.data() + 16, &total, 8);
    return h;
}

}  // namespace

void seal_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::span<const std::span<const std::uint8_t>> pieces, std::uint64_t total,
               std::uint8_t* out) {
    RecordCipher sealer(cipher, message_key, never);
    std::size_t piece = 0, in_piece = 0;
    for (std::uint64_t index = 0, done = 0; done < total; ++index) {
        const std::uint64_t n = std::min(bulk_chunk, total - done);
        std::uint8_t* chunk = out + index * (bulk_chunk + record_tag_size);
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
        const auto header = chunk_header(cookie, index, total);
        sealer.seal(header, {chunk, n},
                    std::span<std::uint8_t, record_tag_size>(chunk + n, record_tag_size));
        done += n;
    }
}

bool open_bulk(Cipher cipher, const DirectionKey& message_key, std::uint64_t cookie,
               std::uint8_t* sealed, std::uint64_t total) {
    RecordCipher opener(cipher, message_key, never);
    for (std::uint64_t index = 0, done = 0; done < total; ++index) {
        const std::uint64_t n = std::min(bulk_chunk, total - done);
        std::uint8_t* chunk = sealed + index * (bulk_chunk + record_tag_size);
        const auto header = chunk_header(cookie, index, total);
        if (!opener.open(
                header, {chunk, n},
                std::span<const std::uint8_t, record_tag_size>(chunk + n, record_tag_size)))
            return false;
        done += n;
    }
    return true;
}

}  // namespace bmi::support::keys
