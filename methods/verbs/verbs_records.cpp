// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/verbs/verbs_records.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "methods/verbs/verbs_wire.hpp"

namespace bmi::method::verbs {

namespace {
constexpr std::string_view bulk_purpose = "verbs rendezvous data";
}  // namespace

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
