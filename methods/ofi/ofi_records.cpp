// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's encryption (doc/security.md, "ofi"). rxm may complete a large message after
// later small ones, so records carry their numbers (support/keys/numbered_records.hpp), with
// the libfabric tag, credits and all, as associated data. A large message's data moves as
// ciphertext from a staging buffer into one (support/keys/sealed_bulk.hpp), a piece of a few
// sealed chunks at a time: each is sealed just before it is posted and opened as soon as it has
// come, so sealing, moving and opening overlap. Grants, which let data land in the receiver's
// own buffer, are not offered to an encrypted peer.
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
    if (region_admits(peer) != 0) return -FI_EAGAIN;  // a posted send meets the same look
    if (!peer.records) return fabric_.inject_small(data, size, peer.fi_addr, tag);
    sealed_.inject_record.resize(size + NumberedRecords::trailer_size);
    peer.records->seal(tag, as_bytes(data, size), sealed_.inject_record.data());
    return fabric_.inject_small(sealed_.inject_record.data(), sealed_.inject_record.size(),
                                peer.fi_addr, tag);
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
    ++counted_.records_failed;
    BMI_LOG(ofi, "bmi_ofi: %s: a record failed authentication; the peer is dropped",
            peer.address.c_str());
    lose(peer, -BMI_EPROTO);
    return false;
}

std::size_t OfiMethod::stage_send(Operation& op, OfiPeer& peer, std::uint64_t record) {
    const auto total = static_cast<std::uint64_t>(op.total_size);
    if (!peer.records) return static_cast<std::size_t>(total);
    return stage(op, peer.records->cipher(), peer.records->send_bulk_key(record), record, total);
}

std::size_t OfiMethod::stage_recv(Operation& op, OfiPeer& peer, std::uint64_t record) {
    const auto total = static_cast<std::uint64_t>(op.actual_size);
    if (!peer.records) return static_cast<std::size_t>(total);
    return stage(op, peer.records->cipher(), peer.records->recv_bulk_key(record), record, total);
}

std::size_t OfiMethod::stage(const Operation& op, support::keys::Cipher cipher,
                             const support::keys::DirectionKey& key, std::uint64_t record,
                             std::uint64_t total) {
    Staged& staged = sealed_.staged[&op];
    staged.bulk = std::make_unique<support::keys::SealedBulk>(cipher, key, record, total);
    staged.bytes = sealed_.spare.take(static_cast<std::size_t>(support::keys::sealed_size(total)));
    return staged.bytes.size();
}

Staged* OfiMethod::staged_of(const Operation& op) {
    if (sealed_.staged.empty())
        return nullptr;  // an instance that encrypts nothing looks nothing up
    const auto it = sealed_.staged.find(&op);
    return it == sealed_.staged.end() ? nullptr : &it->second;
}

void OfiMethod::unstage(const Operation& op) {
    if (sealed_.staged.empty()) return;
    const auto it = sealed_.staged.find(&op);
    if (it == sealed_.staged.end()) return;
    sealed_.spare.give_back(std::move(it->second.bytes));
    sealed_.staged.erase(it);
}

void OfiMethod::seal_piece(Staged& staged, const Operation& op, std::uint64_t offset,
                           std::size_t length) {
    using support::keys::SealedBulk;
    const std::span<const Segment> segments = segments_of(op);
    SealedBulk& bulk = *staged.bulk;
    std::uint8_t* sealed = staged.bytes.data();
    const auto chunks = SealedBulk::sealed_chunks(offset, length);
    for (std::uint64_t index = chunks.first; index < chunks.end; ++index) {
        const std::uint64_t at = SealedBulk::plain_offset(index);
        const auto n = static_cast<std::size_t>(bulk.plain_size(index));
        // Within one segment it seals straight from the user's memory; across segments the
        // chunk is gathered into its place first and sealed there.
        const auto* plain =
            reinterpret_cast<const std::uint8_t*>(within_one_segment(segments, at, n));
        if (plain == nullptr) {
            std::uint8_t* place = sealed + SealedBulk::sealed_offset(index);
            gather_pieces(segments, at, {reinterpret_cast<std::byte*>(place), n});
            plain = place;
        }
        bulk.seal(index, plain, sealed);
    }
}

bool OfiMethod::seal_next() {
    while (!sealed_.unsealed.empty()) {
        Request& request = *sealed_.unsealed.front();
        sealed_.unsealed.pop_front();
        Staged* staged = request.op != nullptr ? staged_of(*request.op) : nullptr;
        if (staged == nullptr) {
            release(request);
            continue;
        }
        seal_piece(*staged, *request.op, request.chunk_offset, request.length);
        submit(request);
        return true;
    }
    return false;
}

bool OfiMethod::open_piece(Request& request, std::size_t length) {
    using support::keys::SealedBulk;
    Operation& op = *request.op;
    Staged* staged = staged_of(op);
    auto& slots = method_slots<OpSlots>(op);
    if (staged == nullptr || slots.error != 0) return true;
    SealedBulk& bulk = *staged->bulk;
    const std::uint64_t offset = request.chunk_offset;
    bool opened = length == request.length;
    const auto chunks = SealedBulk::sealed_chunks(offset, length);
    const std::span<const Segment> segments = segments_of(op);
    for (std::uint64_t index = chunks.first; opened && index < chunks.end; ++index) {
        const std::uint64_t at = SealedBulk::plain_offset(index);
        const auto n = static_cast<std::size_t>(bulk.plain_size(index));
        // Within one segment it opens straight into the user's memory, else in place and is
        // scattered from there.
        auto* into = reinterpret_cast<std::uint8_t*>(within_one_segment(segments, at, n));
        if (into != nullptr) {
            opened = bulk.open(index, staged->bytes.data(), into);
            continue;
        }
        opened = bulk.open(index, staged->bytes.data());
        if (opened)
            scatter_pieces({reinterpret_cast<const std::byte*>(staged->bytes.data() +
                                                               SealedBulk::sealed_offset(index)),
                            n},
                           segments, at);
    }
    if (opened) return true;
    // Nothing of the message is the user's: the receive fails whatever else comes.
    ++counted_.records_failed;
    slots.error = -BMI_EPROTO;
    BMI_LOG(ofi, "bmi_ofi: %s: a large message's data failed authentication; the peer is dropped",
            describe_peer(*op.peer).c_str());
    return false;
}

}  // namespace bmi::method::ofi
