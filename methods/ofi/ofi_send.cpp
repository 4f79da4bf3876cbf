// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's sends: the greeting that makes us known to a peer, eager messages in one
// tagged send, and large ones announced (Rts) and sent in chunks once the receiver is ready.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>

#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/segment_pieces.hpp"

namespace bmi::method::ofi {

int OfiMethod::post(Operation& op) {
    router_.begin_post(op);
    method_slots<OpSlots>(op) = OpSlots{};
    auto& peer = static_cast<OfiPeer&>(*op.peer);
    const int rc =
        router_.end_post(op.kind == OpKind::recv ? post_recv(op, peer) : post_send(op, peer));
    if (rc == 0) {
        method_slots<OpSlots>(op).counted = true;
        ++in_flight_.ops_waiting;
    }
    return rc;
}

int OfiMethod::send_now(Peer& base, OpKind kind, bmi_msg_tag_t tag,
                        std::span<const Segment> segments) {
    auto& peer = static_cast<OfiPeer&>(base);
    if (peer.state != OfiPeer::State::ready || !backlog_empty(peer.fi_addr) ||
        !peer.waiting.empty() || peer.credits == 0)
        return 0;
    std::size_t size = 0;
    for (const Segment& segment : segments) size += static_cast<std::size_t>(segment.size);
    if (above_unexpected_limit(kind, size, peer)) return -BMI_EMSGSIZE;
    if (size + record_overhead(peer) > sizes_.inject_bytes ||
        (kind == OpKind::send && size > eager_limit_to(peer)))
        return 0;
    const void* data = segments.empty() ? nullptr : segments[0].data;
    if (segments.size() > 1) {
        // The provider copies an injected message before the call returns: one gather buffer
        // serves every list.
        gather_.resize(size);
        gather_pieces(segments, 0, gather_);
        data = gather_.data();
    }
    if (closed_in_process(peer)) return 0;  // post() departs it: no Sink calls here
    const Kind wire = kind == OpKind::send ? Kind::eager : Kind::unexpected;
    if (inject_costly(peer, data, size, control_tag(wire, tag)) != 0) return 0;
    if (kind == OpKind::send) sent_expected(peer, tag);
    return 1;
}

int OfiMethod::post_send(Operation& op, OfiPeer& peer) {
    if (op.kind == OpKind::send_unexpected && op.total_size > sizes_.unexpected_limit)
        return -BMI_EMSGSIZE;
    if (op.total_size > max_message_size()) return -BMI_EMSGSIZE;
    if (closed_in_process(peer)) {
        // Gone as if its bye had come (it may still be on its way).
        if (peer.state != OfiPeer::State::departed) depart(peer);
        return -BMI_ECONNRESET;
    }
    auto& slots = method_slots<OpSlots>(op);
    if (peer.lost) return -BMI_ECONNRESET;
    if (peer.state == OfiPeer::State::departed) {
        if (peer.reached_us) return -BMI_ECONNRESET;
        peer.state = OfiPeer::State::fresh;  // a server we know the address of may be back
    }
    // Behind the handshake, or behind sends that wait for credits.
    if (peer.state != OfiPeer::State::ready || !peer.waiting.empty() || peer.credits == 0) {
        slots.phase = OpSlots::held;
        peer.waiting.push_back(&op);
        if (peer.state == OfiPeer::State::fresh) greet(peer);
        if (peer.waits_for_credits())
            peer.send_clock.start(timers_, {peer.fi_addr, kit::DeadlineKind::send},
                                  peer.send_progress(), limits_.send);
        return 0;
    }
    const auto size = static_cast<std::size_t>(op.total_size);
    if (above_unexpected_limit(op.kind, size, peer)) return -BMI_EMSGSIZE;
    const bool eager = op.kind == OpKind::send_unexpected || size <= eager_limit_to(peer);
    if (eager && size + record_overhead(peer) <= sizes_.inject_bytes &&
        backlog_empty(peer.fi_addr)) {
        // The provider copies it now: done without a completion.
        const Kind kind = op.kind == OpKind::send ? Kind::eager : Kind::unexpected;
        const int rc = static_cast<int>(inject_costly(peer, eager_bytes(op, gather_), size,
                                                      control_tag(kind, op.tag, op.msg_class)));
        if (rc == 0) {
            op.actual_size = op.total_size;
            if (op.kind == OpKind::send) sent_expected(peer, op.tag);
            return 1;
        }
        if (rc != -FI_EAGAIN) return bmi_error(rc);
    }
    start_send(op, peer);
    return 0;
}

void OfiMethod::start_send(Operation& op, OfiPeer& peer) {
    auto& slots = method_slots<OpSlots>(op);
    const auto size = static_cast<std::size_t>(op.total_size);
    op.actual_size = op.total_size;
    const bool eager = op.kind == OpKind::send_unexpected || size <= eager_limit_to(peer);
    if (!eager && send_under_grant(op, peer)) return;
    --peer.credits;  // an eager message or an RTS: the callers saw one left
    if (op.kind == OpKind::send) sent_expected(peer, op.tag);
    if (eager) {
        const Kind kind = op.kind == OpKind::send ? Kind::eager : Kind::unexpected;
        Request& request = new_request(Request::Role::send, &op);
        request.data = const_cast<void*>(eager_bytes(op, request.bytes));
        request.length = size;
        request.addr = peer.fi_addr;
        request.tag = giving_credits(peer, control_tag(kind, op.tag, op.msg_class));
        seal_request(peer, request);
        slots.phase = OpSlots::in_flight;
        slots.pending = 1;
        submit(request);
        return;
    }
    if (++large_.next_transfer == 0) large_.next_transfer = 1;
    slots.transfer = large_.next_transfer;
    slots.phase = OpSlots::announced;
    slots.answer_due = kit::Deadlines::Clock::now() + limits_.rendezvous;
    timers_.schedule_by({peer.fi_addr, kit::DeadlineKind::rendezvous}, slots.answer_due);
    large_.awaiting_cts[slots.transfer] = &op;
    // Encrypted, its data is sealed now under the key the Rts's record number names.
    stage_send(op, peer, peer.records ? peer.records->next_number() : 0);
    const Rts rts{op.total_size > 0 ? static_cast<std::uint64_t>(op.total_size) : 0, slots.transfer,
                  static_cast<std::uint32_t>(piece_bytes(staged_of(op)))};
    send_control(peer, Kind::rts, op.tag, &rts, sizeof rts);
}

void OfiMethod::on_cts(OfiPeer& peer, const Cts& cts) {
    auto it = large_.awaiting_cts.find(cts.transfer);
    if (it == large_.awaiting_cts.end() || it->second->peer != &peer)
        return;  // cancelled, or forged
    Operation& op = *it->second;
    large_.awaiting_cts.erase(it);
    if (cts.status != 0) {
        finish(op, -BMI_EMSGSIZE);
        return;
    }
    const Staged* staged = staged_of(op);
    post_chunks(op, peer, Request::Role::data_send, cts.transfer,
                staged != nullptr ? staged->bytes.size() : static_cast<std::size_t>(op.total_size));
}

void OfiMethod::post_chunks(Operation& op, OfiPeer& peer, Request::Role role,
                            std::uint32_t transfer, std::size_t size, bool granted,
                            std::size_t stated_piece) {
    auto& slots = method_slots<OpSlots>(op);
    // A grant's receive stays among the posted receives: one its provider refuses at once
    // leaves them as it ends (on_grant_recv_end).
    slots.phase = role == Request::Role::grant_recv ? OpSlots::granted : OpSlots::moving;
    slots.transfer = transfer;
    // A grant names one receive: its data is one operation, whatever our chunk size. Sealed
    // data moves in pieces of whole sealed chunks, so that each can be opened as it comes.
    Staged* staged = staged_of(op);
    const std::size_t piece = granted ? std::max<std::size_t>(size, 1)
                              : stated_piece != 0 && staged == nullptr ? stated_piece
                                                                       : piece_bytes(staged);
    // Counted first: a chunk the provider refuses at once ends before the others are posted.
    slots.pending = static_cast<std::uint32_t>((size + piece - 1) / piece);
    for (std::size_t offset = 0; offset < size; offset += piece) {
        Request& request = new_request(role, &op);
        const std::size_t length = std::min(piece, size - offset);
        place_chunk(request, staged, offset, length);
        // Sealed data goes a piece per progress pass after the first (seal_next): rxm moves each
        // piece only while we poll, so the receiver opens one while we seal the next.
        if (staged != nullptr && role == Request::Role::data_send) {
            if (offset > 0) {
                request.addr = peer.fi_addr;
                request.tag = data_tag(transfer);
                sealed_.unsealed.push_back(&request);
                continue;
            }
            seal_piece(*staged, op, offset, length);
        }
        request.addr = peer.fi_addr;
        request.tag = granted ? grant_tag(transfer) : data_tag(transfer);
        submit(request);
    }
}

void OfiMethod::place_chunk(Request& request, Staged* staged, std::uint64_t offset,
                            std::size_t length) const {
    const std::span<const Segment> segments = segments_of(*request.op);
    request.length = length;
    request.chunk_offset = offset;
    request.iov.clear();
    if (staged != nullptr) {  // sealed data: the staging buffer's bytes move, not the op's
        request.data = staged->bytes.data() + offset;
        return;
    }
    if (segments.size() == 1) {  // a contiguous buffer, the common case: no list to walk
        request.data = static_cast<std::byte*>(segments[0].data) + offset;
        return;
    }
    for_each_piece(segments, offset, length, [&](std::byte* piece, std::size_t n) {
        if (request.iov.size() <= sizes_.iov_limit) request.iov.push_back({piece, n});
    });
    if (request.iov.size() <= 1) {
        request.data = request.iov.empty() ? nullptr : request.iov.front().iov_base;
        request.iov.clear();
        return;
    }
    if (request.iov.size() <= sizes_.iov_limit) return;
    request.iov.clear();
    request.bounced = true;
    request.bytes.resize(length);
    if (!request.is_recv) gather_pieces(segments, offset, request.bytes);
    request.data = request.bytes.data();
}

const void* OfiMethod::eager_bytes(const Operation& op, std::vector<std::byte>& gathered) {
    if (op.segment_count == 1) return op.segments[0].data;
    gathered.resize(static_cast<std::size_t>(op.total_size));
    gather_pieces(segments_of(op), 0, gathered);
    return gathered.data();
}

void OfiMethod::send_control(OfiPeer& peer, Kind kind, std::uint32_t bmi_tag, const void* body,
                             std::size_t size) {
    Request& request = new_request(Request::Role::control, nullptr);
    const auto* bytes = static_cast<const std::byte*>(body);
    request.bytes.assign(bytes, bytes + size);
    request.data = request.bytes.data();
    request.length = size;
    request.addr = peer.fi_addr;
    request.tag = giving_credits(peer, control_tag(kind, bmi_tag));
    seal_request(peer, request);
    submit(request);
}

ssize_t OfiMethod::inject_costly(OfiPeer& peer, const void* data, std::size_t size,
                                 std::uint64_t tag) {
    const std::uint32_t back = credits_to_give(peer);
    // Its credits and number count only if it went: one the provider refused leaves no gap.
    const std::uint64_t wire_tag = stamped(peer, tag, back);
    const ssize_t rc = inject_sealed(peer, data, size, wire_tag);
    if (rc == 0) {
        --peer.credits;
        stamp_used(peer, wire_tag, back);
    }
    return rc;
}

std::uint64_t OfiMethod::giving_credits(OfiPeer& peer, std::uint64_t tag) {
    // Given back and numbered as it is posted: a post the provider defers still goes, in order.
    const std::uint32_t back = credits_to_give(peer);
    tag = stamped(peer, tag, back);
    stamp_used(peer, tag, back);
    return tag;
}

std::uint64_t OfiMethod::stamped(const OfiPeer& peer, std::uint64_t tag, std::uint32_t back) {
    tag = with_credits(tag, back);
    return numbered(kind_of(tag).value_or(Kind::hello)) ? with_number(tag, peer.order.next_out())
                                                        : tag;
}

void OfiMethod::stamp_used(OfiPeer& peer, std::uint64_t tag, std::uint32_t back) {
    gave(peer, back);
    if (numbered(kind_of(tag).value_or(Kind::hello))) peer.order.sent();
}

void OfiMethod::restart_flow(OfiPeer& peer) {
    for (Request* buffer : peer.order.restart()) unpark(*buffer);
    peer.credits = peer_credits;
    peer.in_hand = 0;
    peer.owed = 0;
    peer.expected_sent = 0;
    peer.expected_seen = 0;
    peer.grants.clear();
}

void OfiMethod::gave(OfiPeer& peer, std::uint32_t credits) {
    peer.owed -= credits;
    // Messages that came before a new handshake reset in_hand are given back too.
    peer.in_hand -= std::min(peer.in_hand, credits);
}

void OfiMethod::on_credits(OfiPeer& peer, std::uint32_t credits) {
    // More than it could owe (a handshake crossed its message) is not kept.
    peer.credits = std::min(peer_credits, peer.credits + credits);
    peer.credits_got += credits;
    if (peer.state == OfiPeer::State::ready && !peer.waiting.empty()) flush_waiting(peer, 0);
}

BufferLimits OfiMethod::buffer_limits() const {
    constexpr std::size_t most = UINT32_MAX;
    return {static_cast<std::uint32_t>(std::min(sizes_.eager_bytes, most)),
            static_cast<std::uint32_t>(
                std::min(static_cast<std::size_t>(sizes_.unexpected_limit), most))};
}

void OfiMethod::note_limits(OfiPeer& peer, const std::optional<BufferLimits>& limits) {
    peer.eager_takes = limits ? limits->eager : SIZE_MAX;
    peer.unexpected_takes = limits ? limits->unexpected : SIZE_MAX;
}

void OfiMethod::flush_waiting(OfiPeer& peer, int error) {
    while (!peer.waiting.empty() && (error != 0 || peer.credits > 0)) {
        Operation& op = *peer.waiting.front();
        peer.waiting.pop_front();
        if (error != 0)
            finish(op, error);
        else if (above_unexpected_limit(op.kind, static_cast<std::size_t>(op.total_size), peer))
            finish(op, -BMI_EMSGSIZE);  // more than its buffers take, as its handshake said
        else
            start_send(op, peer);
    }
}

}  // namespace bmi::method::ofi
