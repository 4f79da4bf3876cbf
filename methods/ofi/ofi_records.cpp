// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's encryption (doc/security.md, "ofi"). rxm may complete a large message after
// later small ones, so records carry their numbers (support/keys/numbered_records.hpp), with
// the libfabric tag, credits and all, as associated data. A large message's data moves as
// ciphertext from a staging buffer into one (support/keys/sealed_bulk.hpp): grants, which let
// data land in the receiver's own buffer, are not offered to an encrypted peer.
#include <cstring>

#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/segment_pieces.hpp"
#include "support/keys/sealed_bulk.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

namespace {
using support::keys::NumberedRecords;

std::span<const std::uint8_t> as_bytes(const void* data, std::size_t size) {
    return {static_cast<const std::uint8_t*>(data), size};
}
}  // namespace

void OfiMethod::start_records(OfiPeer& peer, kit::KeyHandshake& handshake, bool initiator) {
    peer.records.reset();
    if (!handshake.keyed()) return;
    if (handshake.cipher() == support::keys::Cipher::none) {
        BMI_LOG(ofi, "bmi_ofi: %s not encrypted (%s)", peer.address.c_str(),
                gate_.encryption() == kit::Encryption::off ? "encryption is off here"
                                                           : "the peer offers or chose no cipher");
        return;
    }
    const std::optional<support::keys::TrafficKeys> keys = handshake.take_traffic_keys();
    if (!keys) return;
    peer.records = std::make_unique<NumberedRecords>(*keys, initiator, gate_.rekey_records());
    BMI_LOG(ofi, "bmi_ofi: %s encrypted with %s (new key every %llu records)", peer.address.c_str(),
            support::keys::cipher_name(keys->cipher),
            static_cast<unsigned long long>(gate_.rekey_records()));
}

void OfiMethod::seal_request(OfiPeer& peer, Request& request) {
    if (!peer.records || !sealed_kind(kind_of(request.tag).value_or(Kind::eager))) return;
    const std::size_t size = request.length;
    const bool in_place = request.data == request.bytes.data();
    std::vector<std::byte> sealed;
    std::vector<std::byte>& out = in_place ? request.bytes : sealed;
    out.resize(size + NumberedRecords::trailer_size);
    const void* plain = in_place ? out.data() : request.data;
    peer.records->seal(request.tag, as_bytes(plain, size),
                       reinterpret_cast<std::uint8_t*>(out.data()));
    if (!in_place) request.bytes = std::move(sealed);
    request.data = request.bytes.data();
    request.length = request.bytes.size();
}

ssize_t OfiMethod::inject_sealed(OfiPeer& peer, const void* data, std::size_t size,
                                 std::uint64_t tag) {
    if (!peer.records) return fabric_.inject_small(data, size, peer.fi_addr, tag);
    sealing_.resize(size + NumberedRecords::trailer_size);
    peer.records->seal(tag, as_bytes(data, size), sealing_.data());
    return fabric_.inject_small(sealing_.data(), sealing_.size(), peer.fi_addr, tag);
}

bool OfiMethod::open_record(Request& buffer, OfiPeer& peer) {
    std::uint64_t number = 0;
    const auto plain = peer.records->open(
        buffer.tag, reinterpret_cast<std::uint8_t*>(buffer.bytes.data()), buffer.length, number);
    if (plain) {
        buffer.length = *plain;
        buffer.record = number;
        return true;
    }
    ++records_failed_;
    BMI_LOG(ofi, "bmi_ofi: %s: a record failed authentication; the peer is dropped",
            peer.address.c_str());
    lose(peer, -BMI_EPROTO);
    return false;
}

std::size_t OfiMethod::stage_send(Operation& op, OfiPeer& peer, std::uint64_t record) {
    const auto total = static_cast<std::uint64_t>(op.total_size);
    if (!peer.records) return static_cast<std::size_t>(total);
    Staged& staged = staged_[&op];
    staged.record = record;
    staged.bytes.resize(support::keys::sealed_size(total));
    std::vector<std::span<const std::uint8_t>> pieces;
    for (const Segment& segment : segments_of(op))
        if (segment.size > 0)
            pieces.push_back(as_bytes(segment.data, static_cast<std::size_t>(segment.size)));
    support::keys::seal_bulk(peer.records->cipher(), peer.records->send_bulk_key(record), record,
                             pieces, total, staged.bytes.data());
    return staged.bytes.size();
}

std::size_t OfiMethod::stage_recv(Operation& op, std::uint64_t record) {
    Staged& staged = staged_[&op];
    staged.record = record;
    staged.bytes.resize(support::keys::sealed_size(static_cast<std::uint64_t>(op.actual_size)));
    return staged.bytes.size();
}

int OfiMethod::open_staged(Operation& op, std::vector<std::uint8_t>& sealed, std::uint64_t record) {
    auto& peer = static_cast<OfiPeer&>(*op.peer);
    const auto total = static_cast<std::uint64_t>(op.actual_size);
    // A peer that shook hands again since its Rts has other keys: its data cannot open.
    if (!peer.records || sealed.size() != support::keys::sealed_size(total) ||
        !support::keys::open_bulk(peer.records->cipher(), peer.records->recv_bulk_key(record),
                                  record, sealed.data(), total)) {
        ++records_failed_;
        BMI_LOG(ofi, "bmi_ofi: %s: a large message's data failed authentication",
                peer.address.c_str());
        return -BMI_EPROTO;
    }
    const std::span<const Segment> segments = segments_of(op);
    support::keys::for_each_opened_chunk(
        sealed.data(), total, [&](std::span<const std::uint8_t> chunk, std::uint64_t offset) {
            scatter_pieces(std::as_bytes(chunk), segments, offset);
        });
    return 0;
}

}  // namespace bmi::method::ofi
