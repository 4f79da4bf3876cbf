// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/verbs/verbs_records.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "methods/verbs/verbs_wire.hpp"

namespace bmi::method::verbs {

namespace {

using support::keys::Cipher;
using support::keys::DirectionKey;
using support::keys::RecordCipher;

constexpr std::string_view bulk_purpose = "verbs rendezvous data";
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

VerbsRecords::VerbsRecords(const support::keys::TrafficKeys& keys, bool initiator,
                           std::uint64_t rekey_interval)
    : send_(keys.cipher, initiator ? keys.initiator_to_acceptor : keys.acceptor_to_initiator,
            rekey_interval),
      recv_(keys.cipher, initiator ? keys.acceptor_to_initiator : keys.initiator_to_acceptor,
            rekey_interval),
      send_base_(initiator ? keys.initiator_to_acceptor : keys.acceptor_to_initiator),
      recv_base_(initiator ? keys.acceptor_to_initiator : keys.initiator_to_acceptor) {}

std::uint32_t VerbsRecords::seal(std::uint8_t* message, std::uint32_t length) {
    const std::span<const std::uint8_t> header(message, sizeof(MsgHeader));
    const std::span<std::uint8_t> body(message + sizeof(MsgHeader), length - sizeof(MsgHeader));
    send_.seal(header, body,
               std::span<std::uint8_t, record_tag_size>(message + length, record_tag_size));
    return length + static_cast<std::uint32_t>(record_tag_size);
}

std::optional<std::uint32_t> VerbsRecords::open(std::uint8_t* message, std::uint32_t length) {
    if (length < sizeof(MsgHeader) + record_tag_size) return std::nullopt;
    const std::uint32_t plain = length - static_cast<std::uint32_t>(record_tag_size);
    const std::span<const std::uint8_t> header(message, sizeof(MsgHeader));
    const std::span<std::uint8_t> body(message + sizeof(MsgHeader), plain - sizeof(MsgHeader));
    if (!recv_.open(
            header, body,
            std::span<const std::uint8_t, record_tag_size>(message + plain, record_tag_size)))
        return std::nullopt;
    return plain;
}

support::keys::DirectionKey VerbsRecords::send_bulk_key(std::uint64_t cookie) const {
    return support::keys::subkey(send_base_, bulk_purpose, cookie);
}

support::keys::DirectionKey VerbsRecords::recv_bulk_key(std::uint64_t cookie) const {
    return support::keys::subkey(recv_base_, bulk_purpose, cookie);
}

}  // namespace bmi::method::verbs
