// SPDX-License-Identifier: LGPL-2.1-or-later
// Grants: a receive above the eager limit, posted before its message comes, tells the sender
// where the data goes, so that the message skips the RTS and CTS round trip. The data is still
// sent only to a receive that asked for it (doc/methods/ofi.md, "Grants").
#include <rdma/fi_errno.h>

#include "methods/ofi/ofi_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

using Clock = kit::Deadlines::Clock;

void OfiMethod::offer_grant(Operation& op, OfiPeer& peer) {
    const auto size = static_cast<std::size_t>(op.total_size);
    // A message of the peer's waiting in a receive buffer may be for this tag: it matches first.
    if (!switches_.grants || peer.records || size <= sizes_.eager_bytes ||
        size > sizes_.chunk_bytes || peer.state != OfiPeer::State::ready || peer.parked > 0 ||
        closed_in_process(peer))
        return;
    if (++large_.next_transfer == 0) large_.next_transfer = 1;
    post_chunks(op, peer, Request::Role::grant_recv, large_.next_transfer, size, true);
    if (method_slots<OpSlots>(op).phase != OpSlots::granted) return;  // refused, and ended
    const Grant grant{size, peer.expected_seen, large_.next_transfer, 0};
    send_control(peer, Kind::grant, op.tag, &grant, sizeof grant);
}

void OfiMethod::withdraw_grant(Operation& op, Arrival arrival) {
    // Either its sender made the grant void with this message, or it used the grant and sent
    // this one behind the data: the provider matched that data first, so the cancel fails and
    // the data completes the receive. Until then the tag's later messages wait.
    method_slots<OpSlots>(op).phase = OpSlots::withdrawing;
    large_.withdrawn.insert_or_assign(&op, std::move(arrival));
    cancel_data_recvs(op);
}

void OfiMethod::revoke_grant(Operation& op, OfiPeer& peer) {
    auto& slots = method_slots<OpSlots>(op);
    peer.posted_recvs.erase(op);
    slots.phase = OpSlots::revoking;
    slots.answer_due = Clock::now() + limits_.rendezvous;
    timers_.schedule_by({peer.fi_addr, kit::DeadlineKind::rendezvous}, slots.answer_due);
    large_.revoking[slots.transfer] = &op;
    const GrantId revoke{slots.transfer, 0};
    send_control(peer, Kind::revoke, op.tag, &revoke, sizeof revoke);
}

void OfiMethod::on_unused(OfiPeer& peer, const GrantId& unused) {
    auto it = large_.revoking.find(unused.id);
    if (it == large_.revoking.end() || it->second->peer != &peer)
        return;  // its data came, or forged
    Operation& op = *it->second;
    large_.revoking.erase(it);
    method_slots<OpSlots>(op).error = -BMI_ECANCEL;
    cancel_data_recvs(op);
}

void OfiMethod::fail_unanswered_revokes(OfiPeer& peer, Clock::time_point now) {
    // The RTS scan under the same key (fail_unanswered_rts) ran first and set its time.
    const auto due = kit::take_due(
        timers_, {peer.fi_addr, kit::DeadlineKind::rendezvous}, now, large_.revoking,
        [&peer](const Operation* op) {
            return op->peer == &peer ? method_slots<OpSlots>(*op).answer_due : Clock::time_point{};
        },
        kit::Reschedule::earlier_only);
    for (std::uint32_t transfer : due) {
        Operation& op = *large_.revoking.at(transfer);
        large_.revoking.erase(transfer);
        // Data that comes now is dropped with the unasked data, and its send stalls.
        BMI_LOG(error, "bmi_ofi: %s did not answer a revoked grant in %lld ms; cancelling",
                peer.address.c_str(), static_cast<long long>(limits_.rendezvous.count()));
        method_slots<OpSlots>(op).error = -BMI_ECANCEL;
        cancel_data_recvs(op);
    }
}

void OfiMethod::on_grant_recv_end(Request& request, int error, std::size_t length) {
    Operation* op = request.op;
    if (op == nullptr) {
        release(request);
        return;
    }
    auto& slots = method_slots<OpSlots>(*op);
    auto& peer = static_cast<OfiPeer&>(*op->peer);
    if (slots.phase == OpSlots::granted) {
        peer.posted_recvs.erase(*op);
    } else if (slots.phase == OpSlots::revoking) {
        large_.revoking.erase(slots.transfer);  // its data came first: the cancel came too late
    } else if (slots.phase == OpSlots::withdrawing) {
        auto node = large_.withdrawn.extract(op);
        const bmi_msg_tag_t tag = op->tag;
        if (node.empty() || slots.error != 0) {
            end_request(request, error != 0 ? error : slots.error);
            return;
        }
        // The op may end below, and its peer with it: the kept arrivals are matched first.
        if (error == -BMI_ECANCEL) {  // the grant was not used: the message is the receive's
            match_kept(peer, tag);
            release(request);
            slots.pending = 0;
            take_arrival(*op, peer, node.mapped(), node.mapped().body);
            return;
        }
        // The data came under the grant: the message is the next receive's.
        peer.arrivals.push_oldest(std::move(node.mapped()));
        match_kept(peer, tag);
    }
    if (error == 0) {
        op->actual_size = static_cast<bmi_size_t>(length);
        ++peer.expected_seen;
    }
    end_request(request, error);
}

bool OfiMethod::withdrawing(const OfiPeer& peer, bmi_msg_tag_t tag) const {
    for (const auto& [op, arrival] : large_.withdrawn)
        if (op->peer == &peer && op->tag == tag) return true;
    return false;
}

void OfiMethod::match_kept(OfiPeer& peer, bmi_msg_tag_t tag) {
    while (peer.posted_recvs.contains(tag)) {
        auto arrival = peer.arrivals.take(tag);
        if (!arrival) return;
        release_early(peer, *arrival);
        take_arrival(*peer.posted_recvs.take_first(tag), peer, *arrival, arrival->body);
    }
}

void OfiMethod::end_posted_recv(Operation& op, int error) {
    auto& slots = method_slots<OpSlots>(op);
    if (slots.phase != OpSlots::granted) {
        finish(op, error);
        return;
    }
    slots.phase = OpSlots::moving;  // out of the posted receives now; it ends with its data receive
    slots.error = error;
    cancel_data_recvs(op);
}

bool OfiMethod::send_under_grant(Operation& op, OfiPeer& peer) {
    if (peer.records) return false;  // its data would land in the receiver's buffer unopened
    auto it = peer.grants.find(op.tag);
    if (it == peer.grants.end() || static_cast<std::uint64_t>(op.total_size) > it->second.size)
        return false;  // an RTS goes, and makes the grant void
    const std::uint32_t id = it->second.id;
    peer.grants.erase(it);
    ++peer.expected_sent;
    ++counted_.sent_under_grant;
    post_chunks(op, peer, Request::Role::data_send, id, static_cast<std::size_t>(op.total_size),
                true);
    return true;
}

void OfiMethod::sent_expected(OfiPeer& peer, bmi_msg_tag_t tag) {
    ++peer.expected_sent;
    peer.grants.erase(tag);  // this message matches the receive first
}

void OfiMethod::on_grant(OfiPeer& peer, bmi_msg_tag_t tag, const Grant& grant) {
    // A message of ours it had not taken yet could match that receive first.
    if (grant.seen != peer.expected_sent) return;
    if (peer.grants.size() >= most_grants_per_peer && !peer.grants.contains(tag)) return;
    peer.grants.insert_or_assign(tag, grant);
}

void OfiMethod::on_revoke(OfiPeer& peer, const GrantId& revoke) {
    // Data already sent under it is on its way, and ends its receive: no answer.
    for (const auto& [request, owned] : requests_)
        if (request->role == Request::Role::data_send && request->tag == grant_tag(revoke.id) &&
            request->op != nullptr && request->op->peer == &peer)
            return;
    std::erase_if(peer.grants, [&](const auto& entry) { return entry.second.id == revoke.id; });
    const GrantId answer{revoke.id, 0};
    send_control(peer, Kind::unused, 0, &answer, sizeof answer);
}

}  // namespace bmi::method::ofi
