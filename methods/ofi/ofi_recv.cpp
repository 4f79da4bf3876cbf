// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's arrivals: what a receive buffer took, matched to posted receives per peer
// and tag in arrival order, kept until its receive is posted, or handed up as unexpected.
#include <algorithm>
#include <cstring>

#include "methods/ofi/ofi_method_impl.hpp"

namespace bmi::method::ofi {

int OfiMethod::post_recv(Operation& op, OfiPeer& peer) {
    if (peer_gone(peer)) return -BMI_ECONNRESET;
    if (auto arrival = peer.arrivals.take(op.tag)) {
        take_arrival(op, peer, *arrival);
        return 0;
    }
    method_slots<OpSlots>(op).phase = OpSlots::posted;
    peer.posted_recvs.push_back(op);
    return 0;
}

void OfiMethod::take_arrival(Operation& op, OfiPeer& peer, Arrival& arrival) {
    if (arrival.size > op.total_size) {
        if (arrival.announced) {
            const Cts refusal{arrival.transfer, -BMI_EMSGSIZE};
            send_control(peer, Kind::cts, op.tag, &refusal, sizeof refusal);
        }
        finish(op, -BMI_EMSGSIZE);
        return;
    }
    op.actual_size = arrival.size;
    if (!arrival.announced) {
        if (!arrival.body.empty())
            std::memcpy(op.segments[0].data, arrival.body.data(), arrival.body.size());
        finish(op, 0);
        return;
    }
    post_chunks(op, peer, Request::Role::data_recv, arrival.transfer,
                static_cast<std::size_t>(arrival.size));
    const Cts ready{arrival.transfer, 0};
    send_control(peer, Kind::cts, op.tag, &ready, sizeof ready);
}

void OfiMethod::on_message(Request& buffer, fi_addr_t source) {
    const auto kind = kind_of(buffer.tag);
    const std::span<const std::byte> body(buffer.bytes.data(), buffer.length);
    if (kind == Kind::hello) {
        on_hello(buffer);
        repost_buffer(buffer);
        return;
    }
    // Nothing from a source that has not said hello, or not proved the key, reaches anyone.
    auto peer = peer_at(source);
    const bool handshake = kind == Kind::answer || kind == Kind::proof;
    if (!kind || !peer || (peer->state != OfiPeer::State::ready && !handshake)) {
        repost_buffer(buffer);
        return;
    }
    const bmi_msg_tag_t tag = static_cast<bmi_msg_tag_t>(bmi_tag_of(buffer.tag));
    switch (*kind) {
        case Kind::answer:
            on_answer(*peer, body);
            break;
        case Kind::proof:
            on_proof(*peer, body);
            break;
        case Kind::unexpected:
            if (!deliver_unexpected(buffer, *peer)) {
                parked_.push_back(&buffer);
                return;
            }
            break;
        case Kind::eager:
        case Kind::rts: {
            Arrival arrival;
            arrival.tag = tag;
            if (*kind == Kind::eager) {
                arrival.size = static_cast<bmi_size_t>(body.size());
                arrival.body.assign(body.begin(), body.end());
            } else {
                auto rts = decode<Rts>(body);
                if (!rts || rts->size > static_cast<std::uint64_t>(max_message_size())) break;
                arrival.announced = true;
                arrival.size = static_cast<bmi_size_t>(rts->size);
                arrival.transfer = rts->transfer;
            }
            if (Operation* op = peer->posted_recvs.take_first(tag))
                take_arrival(*op, *peer, arrival);
            else
                peer->arrivals.push(std::move(arrival));
            break;
        }
        case Kind::cts:
            if (auto cts = decode<Cts>(body)) on_cts(*peer, *cts);
            break;
        case Kind::abort:
            if (auto abort = decode<Abort>(body)) on_abort(*peer, *abort);
            break;
        case Kind::bye:
            depart(*peer);
            break;
        case Kind::hello:
            break;
    }
    repost_buffer(buffer);
}

bool OfiMethod::deliver_unexpected(Request& buffer, OfiPeer& peer) {
    const auto size = static_cast<bmi_size_t>(buffer.length);
    if (size > unexpected_limit_) return true;  // more than any sender of ours sends: dropped
    void* memory = sink_.alloc_unexpected(peer, size);
    if (memory == nullptr) return false;
    if (size > 0) std::memcpy(memory, buffer.bytes.data(), buffer.length);
    auto shared = peer_at(peer.fi_addr);
    sink_.register_peer(shared);
    sink_.deliver_unexpected(shared, memory, size, bmi_tag_of(buffer.tag), class_of(buffer.tag));
    return true;
}

bool OfiMethod::retry_parked() {
    bool moved = false;
    while (!parked_.empty()) {
        Request& buffer = *parked_.front();
        auto peer = peer_at(buffer.addr);
        if (peer && !deliver_unexpected(buffer, *peer)) return moved;
        parked_.pop_front();
        repost_buffer(buffer);
        moved = true;
    }
    return moved;
}

void OfiMethod::on_abort(OfiPeer& peer, const Abort& abort) {
    peer.arrivals.remove_if(
        [&](const Arrival& a) { return a.announced && a.transfer == abort.transfer; },
        [](const Arrival&) {});
    // A receive already moving: its data will not come.
    for (auto& [request, owned] : requests_) {
        Operation* op = request->op;
        if (request->role != Request::Role::data_recv || op->peer != &peer ||
            method_slots<OpSlots>(*op).transfer != abort.transfer)
            continue;
        method_slots<OpSlots>(*op).error = -BMI_ECANCEL;
        cancel_data_recvs(*op);
        return;
    }
}

void OfiMethod::cancel(Operation& op) {
    auto& slots = method_slots<OpSlots>(op);
    auto& peer = static_cast<OfiPeer&>(*op.peer);
    switch (slots.phase) {
        case OpSlots::held:
            peer.waiting.erase(std::find(peer.waiting.begin(), peer.waiting.end(), &op));
            finish(op, -BMI_ECANCEL);
            return;
        case OpSlots::posted:
            peer.posted_recvs.erase(op);
            finish(op, -BMI_ECANCEL);
            return;
        case OpSlots::announced: {
            awaiting_cts_.erase(slots.transfer);
            const Abort abort{slots.transfer, 0};
            send_control(peer, Kind::abort, op.tag, &abort, sizeof abort);
            finish(op, -BMI_ECANCEL);
            return;
        }
        case OpSlots::moving:
            if (op.kind != OpKind::recv) return;  // sends in the provider end by themselves
            slots.error = -BMI_ECANCEL;
            cancel_data_recvs(op);
            return;
        default:
            return;  // an eager send in the provider ends by itself
    }
}

}  // namespace bmi::method::ofi
