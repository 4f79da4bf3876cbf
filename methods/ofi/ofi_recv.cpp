// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's arrivals: what a receive buffer took, matched to posted receives per peer
// and tag in arrival order, kept until its receive is posted, or handed up as unexpected.
#include <algorithm>
#include <cstring>

#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/segment_pieces.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

int OfiMethod::post_recv(Operation& op, OfiPeer& peer) {
    if (peer_gone(peer)) return -BMI_ECONNRESET;
    // Behind a receive whose grant is being withdrawn, the tag's arrivals wait for it.
    const bool behind = withdrawing(peer, op.tag);
    if (auto arrival = behind ? std::nullopt : peer.arrivals.take(op.tag)) {
        release_early(peer, *arrival);
        take_arrival(op, peer, *arrival, arrival->body);
        return 0;
    }
    // The only receive for its tag: no message of the peer's can match another first.
    const bool alone = !behind && !peer.posted_recvs.contains(op.tag);
    method_slots<OpSlots>(op).phase = OpSlots::posted;
    peer.posted_recvs.push_back(op);
    if (alone) offer_grant(op, peer);
    watch_silence(peer);
    return 0;
}

void OfiMethod::take_arrival(Operation& op, OfiPeer& peer, const Arrival& arrival,
                             std::span<const std::byte> body) {
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
        scatter_pieces(body, segments_of(op), 0);
        finish(op, 0);
        return;
    }
    post_chunks(op, peer, Request::Role::data_recv, arrival.transfer,
                stage_recv(op, peer, arrival.record), false, arrival.piece);
    const Cts ready{arrival.transfer, 0};
    send_control(peer, Kind::cts, op.tag, &ready, sizeof ready);
}

void OfiMethod::on_message(Request& buffer, fi_addr_t source) {
    const auto kind = kind_of(buffer.tag);
    if (kind == Kind::hello) {
        on_hello(buffer);
        repost_buffer(buffer);
        return;
    }
    // A restarted peer's reset carries a token of its own; the nonce of our probe names it.
    if (kind == Kind::reset) {
        on_reset({buffer.bytes.data(), buffer.length}, source);
        repost_buffer(buffer);
        return;
    }
    auto peer = peer_at(source);
    if (peer && !carries_token(buffer, *peer)) {
        peer = nullptr;
        source = FI_ADDR_NOTAVAIL;
        ++counted_.token_mismatches;
    }
    // Unsealed, from endpoints that may know nothing of us: it counts as no traffic of a
    // peer's (ofi_restart.cpp).
    if (kind == Kind::probe) {
        on_probe({buffer.bytes.data(), buffer.length}, source);
        repost_buffer(buffer);
        return;
    }
    // Nothing from a source that has not said hello, or not proved the key, reaches anyone.
    const bool handshake = kind == Kind::answer || kind == Kind::proof;
    if (!kind || !peer || (peer->state != OfiPeer::State::ready && !handshake)) {
        repost_buffer(buffer);
        return;
    }
    // Opened before anything of it is read, its credits too.
    if (peer->records && sealed_kind(*kind) && !open_record(buffer, *peer)) {
        repost_buffer(buffer);
        return;
    }
    ++peer->heard;
    const std::span<const std::byte> body(buffer.bytes.data(), buffer.length);
    if (const std::uint32_t credits = credits_of(buffer.tag); credits != 0)
        on_credits(*peer, credits);
    if (costs_credit(*kind) && !admit_costly(*peer)) {
        // More than its credits: no peer of ours sends that. Dropped, and the peer with it.
        BMI_LOG(error, "bmi_ofi: %s sent past its %u credits; dropped", peer->address.c_str(),
                peer_credits);
        repost_buffer(buffer);
        lose(*peer, -BMI_EPROTO);
        return;
    }
    switch (*kind) {
        case Kind::answer:
            on_answer(*peer, body);
            break;
        case Kind::proof:
            on_proof(*peer, body);
            break;
        case Kind::unexpected:
        case Kind::eager:
        case Kind::rts:
        case Kind::abort:
        case Kind::bye:
            on_ordered(buffer, *peer, *kind);
            return;
        case Kind::cts:
            if (auto cts = decode<Cts>(body)) on_cts(*peer, *cts);
            break;
        case Kind::grant:
            if (auto grant = decode<Grant>(body)) on_grant(*peer, bmi_tag_of(buffer.tag), *grant);
            break;
        case Kind::revoke:
            if (auto revoke = decode<GrantId>(body)) on_revoke(*peer, *revoke);
            break;
        case Kind::unused:
            if (auto unused = decode<GrantId>(body)) on_unused(*peer, *unused);
            break;
        case Kind::ping:
            send_control(*peer, Kind::pong, 0, nullptr, 0);
            break;
        case Kind::hello:
        case Kind::probe:
        case Kind::reset:
        case Kind::credit:  // its credits are taken above
        case Kind::pong:    // heard, above
            break;
    }
    repost_buffer(buffer);
}

bool OfiMethod::carries_token(const Request& buffer, OfiPeer& peer) {
    if (fabric_.token() == 0) return true;
    // The answer to our hello names the token of the endpoint we greeted; with a key, the
    // proofs cover it (proven_text).
    if (peer.token == 0 && peer.state == OfiPeer::State::greeting &&
        kind_of(buffer.tag) == Kind::answer)
        peer.token = buffer.token;
    return buffer.token == peer.token;
}

void OfiMethod::on_ordered(Request& buffer, OfiPeer& peer, Kind kind) {
    if (peer.order.peer_numbers()) {
        switch (peer.order.turn_of(number_of(buffer.tag))) {
            case MessageOrder::Turn::now:
                break;
            case MessageOrder::Turn::early:
                wait_for_turn(buffer, peer);
                return;
            case MessageOrder::Turn::stale:
                // No peer of ours sends it (one from before its last handshake, at most):
                // dropped, its credit given back.
                BMI_LOG(ofi, "bmi_ofi: %s: message number %u out of turn; dropped",
                        peer.address.c_str(), unsigned{number_of(buffer.tag)});
                if (costs_credit(kind)) took(peer);
                repost_buffer(buffer);
                return;
        }
    }
    if (!take_in_turn(buffer, peer, kind, false)) repost_buffer(buffer);
    while (Request* next = peer.order.next_waiting())
        if (!take_in_turn(*next, peer, kind_of(next->tag).value_or(Kind::eager), true))
            unpark(*next);
}

bool OfiMethod::take_in_turn(Request& buffer, OfiPeer& peer, Kind kind, bool spare_posted) {
    peer.order.taken();
    const std::span<const std::byte> body(buffer.bytes.data(), buffer.length);
    switch (kind) {
        case Kind::abort:
            if (auto abort = decode<Abort>(body)) on_abort(peer, *abort);
            return false;
        case Kind::bye:
            depart(peer);
            return false;
        default:
            break;
    }
    if (kind != Kind::unexpected) ++peer.expected_seen;
    // Behind a message of its that waits, so that none overtakes it.
    if (peer.parked > 0 || !take_message(buffer, peer, kind)) {
        park(buffer, peer, spare_posted);
        return true;
    }
    took(peer);
    return false;
}

void OfiMethod::wait_for_turn(Request& buffer, OfiPeer& peer) {
    if (!peer.order.wait(buffer, number_of(buffer.tag))) {
        // A number twice, or more than its credits allow on their way: no peer of ours.
        BMI_LOG(error, "bmi_ofi: %s sent messages out of turn past the bound; dropped",
                peer.address.c_str());
        repost_buffer(buffer);
        lose(peer, -BMI_EPROTO);
        return;
    }
    post_spare();
    // The message it waits behind is the peer's to finish, as a large message's data is.
    peer.stall_clock.start(timers_, {peer.fi_addr, kit::DeadlineKind::stall}, peer.stall_progress(),
                           limits_.stall);
}

void OfiMethod::drop_waiting(OfiPeer& peer) {
    for (Request* buffer : peer.order.take_all_waiting()) unpark(*buffer);
}

bool OfiMethod::admit_costly(OfiPeer& peer) {
    if (peer.in_hand >= peer_credits) return false;
    ++peer.in_hand;
    return true;
}

void OfiMethod::took(OfiPeer& peer) {
    ++peer.owed;
    if (peer.owed >= peer_credits / 2) send_control(peer, Kind::credit, 0, nullptr, 0);
}

bool OfiMethod::take_message(Request& buffer, OfiPeer& peer, Kind kind) {
    if (kind == Kind::unexpected) return deliver_unexpected(buffer, peer);
    const std::span<const std::byte> body(buffer.bytes.data(), buffer.length);
    Arrival arrival;
    arrival.tag = static_cast<bmi_msg_tag_t>(bmi_tag_of(buffer.tag));
    if (kind == Kind::eager) {
        arrival.size = static_cast<bmi_size_t>(body.size());
    } else {
        auto rts = decode<Rts>(body);
        if (!rts || rts->size > static_cast<std::uint64_t>(max_message_size()) ||
            (rts->piece != 0 && (rts->piece < smallest_piece || rts->piece > largest_piece)))
            return true;  // no sender of ours announces that: dropped
        arrival.announced = true;
        arrival.size = static_cast<bmi_size_t>(rts->size);
        arrival.transfer = rts->transfer;
        arrival.piece = rts->piece;
        arrival.record = buffer.record;
    }
    Operation* op = withdrawing(peer, arrival.tag) ? nullptr
                                                   : peer.posted_recvs.take_first(arrival.tag);
    if (op != nullptr) {
        if (method_slots<OpSlots>(*op).phase == OpSlots::granted) {
            if (!arrival.announced) arrival.body.assign(body.begin(), body.end());
            withdraw_grant(*op, std::move(arrival));
            return true;
        }
        // Straight from the receive buffer into the user's: no copy kept in between.
        take_arrival(*op, peer, arrival, body);
        return true;
    }
    // Kept until a receive claims it, within the early budget; else it waits in its buffer.
    arrival.cost = (arrival.announced ? 0 : static_cast<std::int64_t>(body.size())) +
                   arrival_overhead;
    if (!held_.early.fits(peer.early, arrival.cost)) return false;
    held_.early.charge(peer.early, arrival.cost);
    if (!arrival.announced) arrival.body.assign(body.begin(), body.end());
    peer.arrivals.push(std::move(arrival));
    return true;
}

void OfiMethod::release_early(OfiPeer& peer, const Arrival& arrival) {
    if (arrival.cost != 0) held_.early.release(peer.early, arrival.cost);
}

void OfiMethod::park(Request& buffer, OfiPeer& peer, bool spare_posted) {
    ++peer.parked;
    held_.parked.push_back(&buffer);
    if (!spare_posted) post_spare();
}

void OfiMethod::post_spare() {
    // A peer keeps at most its credits' worth of buffers parked, and a few more waiting for
    // their turn; past the total, kept buffers are not replaced and rxm keeps what comes until
    // one is free.
    const auto bytes = static_cast<std::int64_t>(sizes_.buffer_bytes);
    if (!held_.early.fits_total(bytes)) return;
    held_.early.charge(held_.spares, bytes);
    Request& spare = new_request(Request::Role::buffer, nullptr);
    spare.bytes.resize(sizes_.buffer_bytes);
    repost_buffer(spare);
}

void OfiMethod::unpark(Request& buffer) {
    if (held_.spares.count == 0) {
        repost_buffer(buffer);
        return;
    }
    held_.early.release(held_.spares, static_cast<std::int64_t>(sizes_.buffer_bytes));
    release(buffer);
}

void OfiMethod::drop_parked(fi_addr_t addr) {
    std::erase_if(held_.parked, [&](Request* buffer) {
        if (buffer->addr != addr) return false;
        unpark(*buffer);
        return true;
    });
    if (auto peer = peer_at(addr)) peer->parked = 0;
}

bool OfiMethod::deliver_unexpected(Request& buffer, OfiPeer& peer) {
    const auto size = static_cast<bmi_size_t>(buffer.length);
    if (size > sizes_.unexpected_limit) return true;  // more than any sender of ours sends: dropped
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
    // A peer whose first waiting message still waits keeps its later ones waiting too; other
    // peers' go on.
    std::vector<fi_addr_t> blocked;
    for (auto it = held_.parked.begin(); it != held_.parked.end();) {
        Request& buffer = **it;
        if (std::find(blocked.begin(), blocked.end(), buffer.addr) != blocked.end()) {
            ++it;
            continue;
        }
        auto peer = peer_at(buffer.addr);
        if (peer) {
            const auto kind = kind_of(buffer.tag);
            if (!take_message(buffer, *peer, kind.value_or(Kind::eager))) {
                blocked.push_back(buffer.addr);
                ++it;
                continue;
            }
            if (peer->parked > 0) --peer->parked;
            took(*peer);
        }
        it = held_.parked.erase(it);
        unpark(buffer);
        moved = true;
    }
    return moved;
}

void OfiMethod::on_abort(OfiPeer& peer, const Abort& abort) {
    peer.arrivals.remove_if(
        [&](const Arrival& a) { return a.announced && a.transfer == abort.transfer; },
        [&](const Arrival& a) { release_early(peer, a); });
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
        case OpSlots::granted:
            revoke_grant(op, peer);
            return;
        case OpSlots::announced: {
            large_.awaiting_cts.erase(slots.transfer);
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
