// SPDX-License-Identifier: LGPL-2.1-or-later
// The receive side: messages from the SRQ, matching against posted receives, unexpected
// messages under the quota, and rendezvous receives that RDMA-READ the sender's memory.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>

#include "methods/segment_pieces.hpp"
#include "methods/verbs/verbs_method_impl.hpp"
#include "methods/verbs/verbs_peer_checks.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::verbs {

namespace {
// Copies size bytes into the op's segments; the caller checked that they fit.
void scatter(Operation& op, const std::uint8_t* data, std::size_t size) {
    std::size_t at = 0;
    for (int i = 0; i < op.segment_count && at < size; ++i) {
        const std::size_t n = std::min(static_cast<std::size_t>(op.segments[i].size), size - at);
        if (n > 0) std::memcpy(op.segments[i].data, data + at, n);
        at += n;
    }
}

int fin_error(FinStatus status) {
    switch (status) {
        case FinStatus::ok:
            return 0;
        case FinStatus::cancelled:
            return -BMI_ECANCEL;
        case FinStatus::too_long:
            return -BMI_EMSGSIZE;
        case FinStatus::failed:
            return -BMI_EIO;
    }
    return -BMI_EPROTO;
}
}  // namespace

int VerbsMethod::post_recv(Operation& op) {
    auto peer = peers_.adopt(op);
    if (auto arrival = peer->arrivals.take(op.tag)) {
        arrivals_.uncharge(*peer, *arrival);
        Connection* c = nullptr;
        if (auto ct = connections_.find(arrival->connection_id); ct != connections_.end())
            c = ct->second.get();
        match_arrival(op, c, *arrival);
        return 0;
    }
    VerbsOpBook::place(op, Place::recv_posted);
    peer->posted_recvs.push_back(op);
    return 0;
}

void VerbsMethod::match_arrival(Operation& op, Connection* c, Arrival& a) {
    if (!a.rts) {
        if (a.size > op.total_size) {
            ops_.finish(op, -BMI_EMSGSIZE);
            return;
        }
        scatter(op, a.data.get(), static_cast<std::size_t>(a.size));
        op.actual_size = a.size;
        ops_.finish(op, 0);
        return;
    }
    if (c == nullptr || c->state != Connection::State::ready) {
        ops_.finish(op, c != nullptr && c->error != 0 ? c->error : -BMI_ECONNRESET);
        return;
    }
    start_read(op, *c, a.cookie, a.size, std::move(a.segments));
}

void VerbsMethod::start_read(Operation& op, Connection& c, std::uint64_t cookie, bmi_size_t size,
                             std::vector<RemoteSegment> segments) {
    if (size > op.total_size) {
        queue_control(c, MsgType::fin, cookie, FinStatus::too_long);
        ops_.finish(op, -BMI_EMSGSIZE);
        return;
    }
    auto t = std::make_unique<RecvTransfer>();
    t->op = &op;
    t->connection = &c;
    t->cookie = cookie;
    t->read_id = next_read_id_++;
    t->remote = std::move(segments);
    int error = 0;
    if (c.records) {
        // Ciphertext lands here, never in the op's memory, until it opens.
        const std::uint64_t sealed = sealed_size(static_cast<std::uint64_t>(size));
        t->sealed.reset(new std::uint8_t[sealed]);
        t->sealed_segment = {t->sealed.get(), static_cast<bmi_size_t>(sealed)};
        RegCache::Handle hd;
        if (sealed > 0)
            error = reg_->acquire(t->sealed.get(), sealed, RegCache::Use::local_write, hd);
        t->handles.push_back(hd);
    } else {
        for (int i = 0; i < op.segment_count; ++i) {
            RegCache::Handle hd;
            if (error == 0 && op.segments[i].size > 0)
                error = reg_->acquire(op.segments[i].data,
                                      static_cast<std::size_t>(op.segments[i].size),
                                      RegCache::Use::local_write, hd);
            t->handles.push_back(hd);
        }
    }
    if (error != 0) {
        for (auto& hd : t->handles) reg_->release(hd);
        queue_control(c, MsgType::fin, cookie, FinStatus::failed);
        ops_.finish(op, error);
        return;
    }
    op.actual_size = size;
    VerbsOpBook::slots(op).transfer = t.get();
    VerbsOpBook::place(op, Place::recv_reading);
    c.reads.push_back(t.get());
    reads_.emplace(t->read_id, std::move(t));
    schedule(c);
}

// All READs of t are complete (or flushed): tell the sender and finish the receive.
void VerbsMethod::read_done(RecvTransfer& t) {
    for (auto& hd : t.handles) reg_->release(hd);
    Connection& c = *t.connection;
    std::erase(c.reads, &t);  // a cancelled transfer may still be queued for more READs
    const bool damaged = t.sealed && t.error == 0 && !open_sealed(t);
    if (damaged) t.error = -BMI_EPROTO;
    if (c.state == Connection::State::ready && !damaged)
        queue_control(c, MsgType::fin, t.cookie,
                      t.error == 0 || t.error == -BMI_ECANCEL ? FinStatus::ok : FinStatus::failed);
    Operation& op = *t.op;
    const int error = t.error;
    reads_.erase(t.read_id);
    ops_.finish(op, error);
    if (damaged) {
        BMI_LOG(verbs, "verbs: connection %llu: rendezvous data failed authentication",
                static_cast<unsigned long long>(c.id));
        fail_connection(c, -BMI_EPROTO);
    }
}

bool VerbsMethod::open_sealed(RecvTransfer& t) {
    Operation& op = *t.op;
    const auto total = static_cast<std::uint64_t>(op.actual_size);
    if (!open_bulk(t.connection->records->cipher(), t.connection->records->recv_bulk_key(t.cookie),
                   t.cookie, t.sealed.get(), total))
        return false;
    // Chunk by chunk into the op's segments, leaving each tag behind.
    support::keys::for_each_opened_chunk(
        t.sealed.get(), total, [&](std::span<const std::uint8_t> chunk, std::uint64_t offset) {
            scatter_pieces(std::as_bytes(chunk), segments_of(op), offset);
        });
    return true;
}

// A CREDIT costs its sender no credit, so we owe none back for it: returning one would hand
// the sender a credit it never spent, and the window would grow with every CREDIT.
bool VerbsMethod::costs_credit(std::uint32_t buffer) const {
    return device_->recv_pool.at(buffer)[offsetof(MsgHeader, type)] !=
           static_cast<std::uint8_t>(MsgType::credit);
}

bool VerbsMethod::take_credits(Connection& c, std::uint32_t buffer, std::uint32_t length) {
    std::uint8_t* data = device_->recv_pool.at(buffer);
    MsgHeader h;
    if (length < sizeof h) return true;  // on_message refuses it
    std::memcpy(&h, data, sizeof h);
    if (h.credits == 0) return true;
    if (!take_returned_credits(c.send_credits, h.credits, c.send_window)) {
        BMI_LOG(error, "verbs: connection %llu returned %u credits, more than it granted",
                static_cast<unsigned long long>(c.id), h.credits);
        fail_connection(c, -BMI_EPROTO);
        return false;
    }
    c.credits_back += h.credits;
    // Counted once: a parked message comes through here again.
    std::memset(data + offsetof(MsgHeader, credits), 0, sizeof h.credits);
    schedule(c);
    return true;
}

// Handles one SEND that arrived in SRQ buffer `buffer`. False: the message must wait (the
// unexpected quota or the early-data budget is full) and the buffer stays out of the SRQ until
// retry_parked().
bool VerbsMethod::on_message(Connection& c, std::uint32_t buffer, std::uint32_t length) {
    std::uint8_t* data = device_->recv_pool.at(buffer);
    MsgHeader h;
    if (length < sizeof h) {
        fail_connection(c, -BMI_EPROTO);
        return true;
    }
    if (!take_credits(c, buffer, length)) return true;
    std::memcpy(&h, data, sizeof h);
    const std::uint8_t* body = data + sizeof h;
    const std::uint32_t body_length = length - static_cast<std::uint32_t>(sizeof h);
    switch (static_cast<MsgType>(h.type)) {
        case MsgType::eager:
        case MsgType::unexpected:
        case MsgType::rts:
            return on_data_message(c, h, body, body_length);
        case MsgType::fin:
            on_fin(c, h);
            return true;
        case MsgType::cancel:
            on_cancel(c, h);
            return true;
        case MsgType::credit:
            return true;
    }
    BMI_LOG(error, "verbs: unknown message type %u", h.type);
    fail_connection(c, -BMI_EPROTO);
    return true;
}

bool VerbsMethod::on_data_message(Connection& c, const MsgHeader& h, const std::uint8_t* body,
                                  std::uint32_t length) {
    auto& peer = *c.peer;
    const auto type = static_cast<MsgType>(h.type);
    const auto size = static_cast<bmi_size_t>(h.size);
    std::vector<RemoteSegment> segs;
    if (!data_message_well_formed(h, {body, length}, static_cast<std::uint64_t>(max_message_size()),
                                  segs, c.records != nullptr)) {
        fail_connection(c, -BMI_EPROTO);
        return true;
    }
    if (type == MsgType::unexpected) {
        if (size > unexpected_limit_) {  // our HELLO said we take no more
            BMI_LOG(error,
                    "verbs: unexpected message of %lld bytes on connection %llu is above "
                    "this instance's limit of %lld; closing it",
                    static_cast<long long>(size), static_cast<unsigned long long>(c.id),
                    static_cast<long long>(unexpected_limit_));
            fail_connection(c, -BMI_EPROTO);
            return true;
        }
        void* memory = sink_.alloc_unexpected(*c.peer, size);
        if (memory == nullptr) return false;
        if (size > 0) std::memcpy(memory, body, length);
        sink_.deliver_unexpected(c.peer, memory, size, h.tag, h.msg_class);
        return true;
    }
    if (Operation* posted = peer.posted_recvs.take_first(h.tag)) {
        Operation& op = *posted;
        VerbsOpBook::place(op, Place::posting);
        if (type == MsgType::rts) {
            start_read(op, c, h.cookie, size, std::move(segs));
        } else if (size > op.total_size) {
            ops_.finish(op, -BMI_EMSGSIZE);
        } else {
            scatter(op, body, length);
            op.actual_size = size;
            ops_.finish(op, 0);
        }
        return true;
    }
    Arrival a;
    a.rts = type == MsgType::rts;
    a.tag = h.tag;
    a.size = size;
    a.cookie = h.cookie;
    a.connection_id = c.id;
    a.segments = std::move(segs);
    return arrivals_.keep(c, std::move(a), body);
}

void VerbsMethod::on_fin(Connection& c, const MsgHeader& h) {
    // Cookies are ours and count up, so any peer can guess another's: a FIN is honoured only
    // on the connection its RTS went out on. The receiver answers each RTS (or our CANCEL of
    // it) with exactly one FIN, and a transfer lives until then, so an unknown or foreign
    // cookie on a working connection is never a race: it is that connection's protocol error.
    auto it = sends_.find(h.cookie);
    if (it == sends_.end() || it->second->connection != &c) {
        BMI_LOG(error, "verbs: FIN for a cookie not sent on connection %llu",
                static_cast<unsigned long long>(c.id));
        fail_connection(c, -BMI_EPROTO);
        return;
    }
    SendTransfer& t = *it->second;
    for (auto& hd : t.handles) reg_->release(hd);
    Operation* op = t.op;
    const bool staged = t.staging != nullptr;
    sends_.erase(it);
    if (staged) wake_staging_waiters();
    ++stats_.fins;
    if (op != nullptr) ops_.finish(*op, fin_error(static_cast<FinStatus>(h.status)));
}

void VerbsMethod::on_cancel(Connection& c, const MsgHeader& h) {
    VerbsPeer& peer = *c.peer;
    bool dropped = false;
    peer.arrivals.remove_if(
        [&](const Arrival& a) { return a.rts && a.cookie == h.cookie && a.connection_id == c.id; },
        [&](const Arrival& a) {
            arrivals_.uncharge(peer, a);
            dropped = true;
        });
    if (dropped) queue_control(c, MsgType::fin, h.cookie, FinStatus::cancelled);
    // Otherwise already matched: the READ's FIN releases the sender.
}

bool VerbsMethod::retry_parked() {
    bool moved = false;
    for (std::size_t i = 0; i < work_.with_parked.size();) {
        auto it = connections_.find(work_.with_parked[i]);
        Connection* c = it == connections_.end() ? nullptr : it->second.get();
        while (c != nullptr && !c->parked.empty()) {
            auto [buffer, length] = c->parked.front();
            const bool costs = costs_credit(buffer);
            if (!on_message(*c, buffer, length)) break;
            if (c->state == Connection::State::failed) break;  // it gave parked buffers back
            c->parked.pop_front();
            moved = true;
            device_->post_recv(buffer);
            if (costs) ++c->owed_credits;
            schedule(*c);
        }
        if (c == nullptr || c->parked.empty()) {
            work_.with_parked[i] = work_.with_parked.back();
            work_.with_parked.pop_back();
        } else {
            ++i;
        }
    }
    return moved;
}

}  // namespace bmi::method::verbs
