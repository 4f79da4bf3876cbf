// SPDX-License-Identifier: LGPL-2.1-or-later
// The send side: eager messages and RTS through credits and send-queue slots, control
// messages (FIN, CANCEL, CREDIT), and the RDMA READs of a receive in progress.
#include <algorithm>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "methods/verbs/verbs_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::verbs {

int VerbsMethod::post_send(Operation& op) {
    auto peer = peers_.adopt(op);
    if (op.kind == OpKind::send_unexpected && op.total_size > unexpected_limit_)
        return -BMI_EMSGSIZE;
    int error = 0;
    Connection* c = connection_for(peer, error);
    if (c == nullptr) return error;
    if (op.kind == OpKind::send_unexpected && c->peer_unexpected_limit != 0 &&
        op.total_size > c->peer_unexpected_limit)
        return -BMI_EMSGSIZE;
    VerbsOpBook::slots(op).connection = c;
    op.actual_size = op.total_size;
    VerbsOpBook::place(op, Place::send_queued);
    c->sends.push_back(op);
    if (c->state == Connection::State::ready) pump(*c);
    return 0;
}

void VerbsMethod::schedule(Connection& c) {
    if (c.pump_scheduled) return;
    c.pump_scheduled = true;
    work_.to_pump.push_back(c.id);
}

void VerbsMethod::queue_control(Connection& c, MsgType type, std::uint64_t cookie,
                                FinStatus status) {
    c.controls.push_back(Control{type, cookie, status});
    schedule(c);
}

// Sends what the connection's credits, send-queue slots and the send-buffer pool allow, in
// this order: control messages (they free the other side), READs, then new messages.
void VerbsMethod::pump(Connection& c) {
    if (c.state != Connection::State::ready) return;
    auto& pool = device_->send_pool;
    while (!c.controls.empty() && c.sq_free > 0) {
        const Control& ctl = c.controls.front();
        if (ctl.type != MsgType::credit && c.send_credits == 0) break;
        if (pool.free.empty()) {
            work_.starved.push_back(c.id);
            return;
        }
        if (!send_control(c, ctl)) return;
        c.controls.pop_front();
    }
    while (!c.reads.empty() && c.sq_free > 0) {
        RecvTransfer& t = *c.reads.front();
        if (!post_reads(c, t)) return;
        if (t.issued_all || t.error != 0) c.reads.pop_front();
    }
    if (!c.sends.empty() && c.send_credits == 0) ++stats_.credit_waits;
    while (!c.sends.empty() && c.sq_free > 0 && c.send_credits > 0) {
        if (pool.free.empty()) {
            work_.starved.push_back(c.id);
            return;
        }
        Operation& op = c.sends.front();
        if (!staging_allows(c, op)) break;
        c.sends.pop_front();
        // Posted before the peer's HELLO said how much it takes.
        if (op.kind == OpKind::send_unexpected && op.total_size > c.peer_unexpected_limit) {
            ops_.finish(op, -BMI_EMSGSIZE);
            continue;
        }
        if (!send_op(c, op)) return;
    }
    watch_credits(c);  // what is left waits for the peer's credits
    // Nothing carried our consumed-buffer count back: say it alone once it is worth a
    // message (half the window), so a sender never waits on a receiver that only receives.
    if (c.owed_credits * 2 >= device_->choice.credits && c.sq_free > 0) {
        if (pool.free.empty()) {
            work_.starved.push_back(c.id);  // a freed send buffer brings us back here
            return;
        }
        send_control(c, Control{MsgType::credit, 0, FinStatus::ok});
    }
}

void VerbsMethod::fill_header(Connection& c, MsgHeader& h, MsgType type) {
    h.type = static_cast<std::uint8_t>(type);
    h.credits = static_cast<std::uint16_t>(std::min(c.owed_credits, 0xffff));
    c.owed_credits -= h.credits;
    c.granted_credits += h.credits;
    if (type != MsgType::credit) --c.send_credits;
}

bool VerbsMethod::post_buffer(Connection& c, std::uint32_t buffer, std::uint32_t length) {
    auto& pool = device_->send_pool;
    // Sealed in the order the queue pair carries them: the receiver's counter follows it.
    if (c.records) length = c.records->seal(pool.at(buffer), length);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(pool.at(buffer));
    sge.length = length;
    sge.lkey = pool.lkey(buffer);
    ibv_send_wr wr{};
    wr.wr_id = (kind_send << kind_shift) | buffer;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(c.qp, &wr, &bad) != 0) {
        release_send_buffer(buffer);
        fail_connection(c, -BMI_EIO);
        return false;
    }
    --c.sq_free;
    ++stats_.messages;
    return true;
}

bool VerbsMethod::send_control(Connection& c, const Control& ctl) {
    auto& pool = device_->send_pool;
    const std::uint32_t buffer = pool.free.back();
    pool.free.pop_back();
    MsgHeader h{};
    fill_header(c, h, ctl.type);
    h.cookie = ctl.cookie;
    h.status = static_cast<std::uint32_t>(ctl.status);
    std::memcpy(pool.at(buffer), &h, sizeof h);
    if (ctl.type == MsgType::credit) ++stats_.credit_messages;
    return post_buffer(c, buffer, sizeof h);
}

bool VerbsMethod::send_op(Connection& c, Operation& op) {
    auto& pool = device_->send_pool;
    const std::uint32_t buffer = pool.free.back();
    pool.free.pop_back();
    if (op.kind == OpKind::send_unexpected ||
        op.total_size <= static_cast<bmi_size_t>(eager_payload))
        return send_eager(c, op, buffer);
    return send_rts(c, op, buffer);
}

bool VerbsMethod::send_eager(Connection& c, Operation& op, std::uint32_t buffer) {
    std::uint8_t* out = device_->send_pool.at(buffer);
    MsgHeader h{};
    const bool unexpected = op.kind == OpKind::send_unexpected;
    fill_header(c, h, unexpected ? MsgType::unexpected : MsgType::eager);
    if (unexpected) h.msg_class = op.msg_class;
    h.tag = op.tag;
    h.size = static_cast<std::uint64_t>(op.total_size);
    std::memcpy(out, &h, sizeof h);
    std::size_t at = sizeof h;
    for (int i = 0; i < op.segment_count; ++i) {
        const auto n = static_cast<std::size_t>(op.segments[i].size);
        if (n > 0) std::memcpy(out + at, op.segments[i].data, n);
        at += n;
    }
    if (!post_buffer(c, buffer, static_cast<std::uint32_t>(at))) {
        ops_.finish(op, c.error != 0 ? c.error : -BMI_EIO);
        return false;
    }
    ++stats_.eager_sends;
    // The payload is in our registered buffer: the op is done as far as the caller goes.
    ops_.finish(op, 0);
    return true;
}

bool VerbsMethod::staging_allows(Connection& c, const Operation& op) {
    if (!c.records || op.kind == OpKind::send_unexpected ||
        op.total_size <= static_cast<bmi_size_t>(eager_payload))
        return true;
    const auto bytes =
        static_cast<std::int64_t>(sealed_size(static_cast<std::uint64_t>(op.total_size)));
    // One send alone always goes, or a message larger than the budget would never leave.
    if (staging_.budget.fits(c.peer->staging, bytes) || staging_.budget.total() == 0) return true;
    ++stats_.staging_waits;
    if (std::find(staging_.waiters.begin(), staging_.waiters.end(), c.id) == staging_.waiters.end())
        staging_.waiters.push_back(c.id);
    return false;
}

void VerbsMethod::wake_staging_waiters() {
    for (std::uint64_t id : std::exchange(staging_.waiters, {}))
        if (auto it = connections_.find(id); it != connections_.end()) schedule(*it->second);
}

bool VerbsMethod::send_rts(Connection& c, Operation& op, std::uint32_t buffer) {
    auto t = std::make_unique<SendTransfer>();
    t->op = &op;
    t->connection = &c;
    std::vector<RemoteSegment> segs;
    int error = 0;
    auto offer = [&](void* data, std::size_t size) {
        RegCache::Handle hd;
        if (error == 0) error = reg_->acquire(data, size, RegCache::Use::remote_read, hd);
        if (error != 0) return;
        t->handles.push_back(hd);
        segs.push_back(RemoteSegment{reinterpret_cast<std::uintptr_t>(data), size, hd.mr->rkey, 0});
    };
    int pieces = 0;
    for (int i = 0; i < op.segment_count; ++i) pieces += op.segments[i].size > 0 ? 1 : 0;
    if (c.records) {
        // The peer must READ ciphertext only: seal a copy and offer that alone.
        const auto total = static_cast<std::uint64_t>(op.total_size);
        std::vector<std::span<const std::uint8_t>> plain;
        for (int i = 0; i < op.segment_count; ++i)
            plain.emplace_back(static_cast<const std::uint8_t*>(op.segments[i].data),
                               static_cast<std::size_t>(op.segments[i].size));
        t->staging = std::make_unique<Staging>(staging_.budget, c.peer, sealed_size(total));
        t->cookie = next_cookie_++;
        seal_bulk(c.records->cipher(), c.records->send_bulk_key(t->cookie), t->cookie, plain, total,
                  t->staging->data());
        stats_.sealed_bytes += total;
        offer(t->staging->data(), t->staging->size());
    } else if (pieces > static_cast<int>(max_rts_segments)) {
        // More pieces than an RTS can describe: pack them (the fallback beyond native lists).
        t->packed.reset(new std::uint8_t[static_cast<std::size_t>(op.total_size)]);
        std::size_t at = 0;
        for (int i = 0; i < op.segment_count; ++i) {
            std::memcpy(t->packed.get() + at, op.segments[i].data,
                        static_cast<std::size_t>(op.segments[i].size));
            at += static_cast<std::size_t>(op.segments[i].size);
        }
        offer(t->packed.get(), at);
    } else {
        for (int i = 0; i < op.segment_count; ++i)
            if (op.segments[i].size > 0)
                offer(op.segments[i].data, static_cast<std::size_t>(op.segments[i].size));
    }
    if (error != 0) {
        for (auto& hd : t->handles) reg_->release(hd);
        release_send_buffer(buffer);
        ops_.finish(op, error);
        return true;  // the connection is fine; go on with the next op
    }
    const std::uint64_t cookie = t->staging ? t->cookie : next_cookie_++;
    MsgHeader h{};
    fill_header(c, h, MsgType::rts);
    h.tag = op.tag;
    h.size = static_cast<std::uint64_t>(op.total_size);
    h.cookie = cookie;
    h.seg_count = static_cast<std::uint32_t>(segs.size());
    std::uint8_t* out = device_->send_pool.at(buffer);
    std::memcpy(out, &h, sizeof h);
    std::memcpy(out + sizeof h, segs.data(), segs.size() * sizeof(RemoteSegment));
    VerbsOpBook::slots(op).cookie = cookie;
    VerbsOpBook::place(op, Place::send_rts);
    watch_rts(c, *t);
    sends_.emplace(cookie, std::move(t));
    ++stats_.rts_sends;
    return post_buffer(c, buffer,
                       static_cast<std::uint32_t>(sizeof h + segs.size() * sizeof(RemoteSegment)));
}

// Posts READs for t while the send queue has room. Each READ covers part of one remote
// segment and at most max_read_sge local pieces, so no list is ever packed on this side.
bool VerbsMethod::post_reads(Connection& c, RecvTransfer& t) {
    Operation& op = *t.op;
    const Segment* local = t.sealed ? &t.sealed_segment : op.segments;
    while (c.sq_free > 0 && t.error == 0 && t.remote_index < t.remote.size()) {
        const RemoteSegment& r = t.remote[t.remote_index];
        std::uint64_t want = std::min<std::uint64_t>(r.length - t.remote_offset, device_->max_msg);
        ibv_sge sges[16];
        int n = 0;
        std::uint64_t got = 0;
        while (got < want && n < device_->max_read_sge && t.local_index < t.handles.size()) {
            const Segment& s = local[t.local_index];
            if (s.size == 0) {
                ++t.local_index;
                continue;
            }
            const std::uint64_t room = static_cast<std::uint64_t>(s.size) - t.local_offset;
            const std::uint64_t take = std::min(room, want - got);
            sges[n].addr = reinterpret_cast<std::uintptr_t>(s.data) + t.local_offset;
            sges[n].length = static_cast<std::uint32_t>(take);
            sges[n].lkey = t.handles[t.local_index].mr->lkey;
            ++n;
            got += take;
            t.local_offset += take;
            if (t.local_offset == static_cast<std::uint64_t>(s.size)) {
                ++t.local_index;
                t.local_offset = 0;
            }
        }
        ibv_send_wr wr{};
        wr.wr_id = (kind_read << kind_shift) | t.read_id;
        wr.sg_list = sges;
        wr.num_sge = n;
        wr.opcode = IBV_WR_RDMA_READ;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = r.addr + t.remote_offset;
        wr.wr.rdma.rkey = r.rkey;
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(c.qp, &wr, &bad) != 0) {
            fail_connection(c, -BMI_EIO);
            return false;
        }
        --c.sq_free;
        ++t.outstanding;
        ++stats_.read_wrs;
        t.remote_offset += got;
        if (t.remote_offset == r.length) {
            ++t.remote_index;
            t.remote_offset = 0;
        }
    }
    t.issued_all = t.remote_index == t.remote.size();
    return true;
}

void VerbsMethod::release_send_buffer(std::uint32_t index) {
    device_->send_pool.free.push_back(index);
    // One freed buffer can unblock one starved connection; wake them in order.
    while (!work_.starved.empty()) {
        const std::uint64_t id = work_.starved.front();
        work_.starved.erase(work_.starved.begin());
        if (auto it = connections_.find(id); it != connections_.end()) {
            schedule(*it->second);
            break;
        }
    }
}

}  // namespace bmi::method::verbs
