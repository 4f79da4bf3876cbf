// SPDX-License-Identifier: LGPL-2.1-or-later
// Ring messages of the shm method: placing sends, receiving and matching; a matched large
// message goes to ShmLargeCopies (shm_large_copies.hpp), which picks its path.
//
// Small messages (<= eager limit) are copied into the ring and complete at once. Larger ones
// are announced with an RTS listing the sender's buffer; the receiver, once a receive matches,
// reads that memory directly with process_vm_readv and answers DONE (single copy). Where the
// kernel refuses that (EPERM/ENOSYS) or the user forced it off, the receiver answers CTS and
// the sender streams DATA chunks through the ring (two copies). A receive that is too small
// gets -BMI_EMSGSIZE and the sender a NAK with the same error. Every message's header is
// checked before anything is allocated from or copied out of it; a bad one costs the
// connection (-BMI_EPROTO), never memory safety.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <unistd.h>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_copy.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// Slots per DATA chunk: a sixteenth of the message, at least 64 KiB and at most a quarter
// ring. The receiver copies a chunk out only once the sender has copied all of it in, so
// the first and last chunks are not overlapped, and below 64 KiB the cost per chunk shows
// instead (doc/perf/code-figures.md, "Stream chunks").
std::uint32_t stream_chunk_slots(const Ring& ring, bmi_size_t message) {
    std::uint64_t quarter = std::max<std::uint32_t>(1, ring.slot_count() / 4);
    std::uint64_t floor = std::min<std::uint64_t>(quarter, (64u << 10) / ring.slot_size());
    std::uint64_t sixteenth = static_cast<std::uint64_t>(message) / 16 / ring.slot_size();
    return static_cast<std::uint32_t>(
        std::clamp(sixteenth, std::max<std::uint64_t>(floor, 1), quarter));
}
}  // namespace

void ShmMethod::write_header(const Window& window, MsgType type, bmi_msg_tag_t tag,
                             std::uint32_t slots, std::int32_t aux, std::uint64_t size,
                             std::uint64_t cookie) {
    MsgHeader h{static_cast<std::uint32_t>(type), tag, slots, aux, size, cookie};
    window.write(0, &h, sizeof h);
}

void ShmMethod::announce(Connection& conn) {
    last_announced_ = conn.id;
    if (!conn.peer_bell.mapped()) {
        // Placed before we took the hello's reply. The acceptor sends its reply and only then
        // visits the ring once: if the reply is not here yet, that visit is still to come and
        // finds the message; if it is, taking it now rings for everything we placed. Left
        // for our next progress call, the message would wait for the acceptor's sweep.
        if (conn.state == ConnState::await_reply) take_reply_now(conn);
        return;
    }
    if (!conn.tx.consumer_watching()) {
        conn.wake_peer();
        return;
    }
    // Read after consumer_watching's fence: the peer raises the flag, fences and then looks
    // at the rings it watches, so one of us sees the other.
    if (conn.peer_bell.owner_sleeping()) conn.write_peer_event();
}

void ShmMethod::take_reply_now(Connection& conn) {
    if (int rc = setup_.receive_reply(conn); rc != 0) {
        conn.socket_error = rc;  // the next pass closes the connection
        visits_.mark_busy(conn);
    }
}

// --- sending ---

bool ShmMethod::place_inline(Connection& conn, OpKind kind, bmi_msg_tag_t tag,
                             std::uint8_t msg_class, std::span<const Segment> segments,
                             bmi_size_t size) {
    Ring& ring = conn.tx;
    auto bytes = static_cast<std::size_t>(size);
    std::uint32_t slots = ring.slots_for(header_size + bytes);
    if (!ring.has_room(slots)) return false;
    Window w = ring.claim(slots);
    bool unexpected = kind == OpKind::send_unexpected;
    write_header(w, unexpected ? MsgType::unexpected : MsgType::eager, tag, slots,
                 unexpected ? msg_class : 0, bytes, 0);
    gather(segments, 0, w, header_size, bytes);
    ring.publish(slots);
    return true;
}

ShmMethod::Placed ShmMethod::unexpected_fit(const Connection& conn, bmi_size_t size) {
    if (size > ring_payload_limit(conn.tx)) return Placed::too_large;  // only one record takes it
    if (conn.peer_unexpected_limit != 0)
        return size > conn.peer_unexpected_limit ? Placed::too_large : Placed::completed;
    return size > default_unexpected_limit ? Placed::held : Placed::completed;
}

ShmMethod::Placed ShmMethod::place_send(Connection& conn, Operation& op) {
    Ring& ring = conn.tx;
    const bmi_size_t eager = inline_limit(conn.tx, options_.eager_limit);
    if (op.kind == OpKind::send_unexpected)
        if (const Placed fit = unexpected_fit(conn, op.total_size); fit != Placed::completed)
            return fit;
    if (op.kind == OpKind::send_unexpected || op.total_size <= eager) {
        if (!place_inline(conn, op.kind, op.tag, op.msg_class, segments_of(op), op.total_size))
            return Placed::no_room;
        op.actual_size = op.total_size;
        return Placed::completed;
    }
    // The RTS lists our buffer so the receiver can pick the path (shm_protocol.cpp,
    // start_transfer); without iovecs (single copy off and the buffer not shared, or a list
    // too long for an inline message) it can only ask for two copies. A shared buffer is
    // offered first: the offer must be on the socket before the RTS is in the ring.
    int count = nonempty_segments(segments_of(op));
    auto max_iovs = static_cast<int>(eager / static_cast<bmi_size_t>(sizeof(RemoteIov)));
    // Offers go only on an open connection: a hello reply already in is taken now, not at the
    // next pass, so that a connection's first large message can be shared too.
    if (conn.state == ConnState::await_reply && count <= max_iovs) take_reply_now(conn);
    bool shared = count <= max_iovs && buffers_.offer(conn, segments_of(op));
    if ((!copies_.single_copy() && !shared) || count > max_iovs) count = 0;
    std::uint32_t slots =
        ring.slots_for(header_size + static_cast<std::size_t>(count) * sizeof(RemoteIov));
    if (!ring.has_room(slots)) return Placed::no_room;
    std::vector<RemoteIov> iovs(static_cast<std::size_t>(count));
    describe_segments(segments_of(op), iovs);
    std::uint64_t cookie = next_cookie_++;
    Window w = ring.claim(slots);
    write_header(w, MsgType::rts, op.tag, slots, count, static_cast<std::uint64_t>(op.total_size),
                 cookie);
    w.write(header_size, iovs.data(), iovs.size() * sizeof(RemoteIov));
    ring.publish(slots);
    op.transferred = 0;
    conn.sends.emplace(cookie, &op);
    ops_.place(op, Place::in_flight, conn.id);
    ShmOpBook::slots(op).cookie = cookie;
    announced(conn, op);
    return Placed::announced;
}

bool ShmMethod::place_control(Connection& conn, const Control& control) {
    std::uint32_t slots = conn.tx.slots_for(header_size + control.payload.size());
    if (!conn.tx.has_room(slots)) return false;
    Window w = conn.tx.claim(slots);
    write_header(w, control.type, 0, slots, control.aux, control.size, control.cookie);
    w.write(header_size, control.payload.data(), control.payload.size());
    conn.tx.publish(slots);
    return true;
}

// Streams DATA for two-copy sends while the ring has room; false if it ran out of room.
bool ShmMethod::stream_data(Connection& conn, bool& moved) {
    Ring& ring = conn.tx;
    for (std::uint32_t round = 0; round < ring.slot_count() && !conn.streams.empty(); ++round) {
        Operation& op = *conn.streams.front();
        std::uint32_t slots = std::min(ring.free_slots(), stream_chunk_slots(ring, op.total_size));
        if (slots == 0) return false;
        auto left = static_cast<std::size_t>(op.total_size - op.transferred);
        std::size_t bytes = std::min(left, static_cast<std::size_t>(slots) * ring.slot_size() -
                                               ring_stamp_size - header_size);
        slots = ring.slots_for(header_size + bytes);
        Window w = ring.claim(slots);
        write_header(w, MsgType::data, op.tag, slots, 0, bytes, ShmOpBook::slots(op).cookie);
        gather(segments_of(op), static_cast<std::uint64_t>(op.transferred), w, header_size, bytes);
        ring.publish(slots);
        op.transferred += static_cast<bmi_size_t>(bytes);
        moved = true;
        if (op.transferred == op.total_size) {
            // Every byte is out of the user's buffer: the send is complete locally.
            conn.streams.pop_front();
            op.actual_size = op.total_size;
            ops_.finish(op, 0);
        }
    }
    return conn.streams.empty();
}

bool ShmMethod::flush(Connection& conn) {
    bool moved = false;
    bool blocked = false;
    bool held = false;
    for (int attempt = 0; attempt < 2 && !held; ++attempt) {
        blocked = false;
        while (!conn.controls.empty() && place_control(conn, conn.controls.front())) {
            conn.controls.pop_front();
            moved = true;
        }
        if (!conn.controls.empty()) blocked = true;
        if (!blocked && !stream_data(conn, moved)) blocked = true;
        while (!blocked && !conn.send_queue.empty()) {
            Operation& op = conn.send_queue.front();
            conn.send_queue.pop_front();
            ops_.unplace(op);
            Placed placed = place_send(conn, op);
            if (placed == Placed::too_large) {
                moved = true;
                ops_.finish(op, -BMI_EMSGSIZE);
                continue;
            }
            if (placed == Placed::held) {
                // The reply brings the limit, and a visit that flushes this queue again.
                conn.send_queue.push_front(op);
                ops_.place(op, Place::queued_send, conn.id);
                held = true;
                break;
            }
            if (placed == Placed::no_room) {
                conn.send_queue.push_front(op);
                ops_.place(op, Place::queued_send, conn.id);
                blocked = true;
                break;
            }
            moved = true;
            if (placed == Placed::completed) ops_.finish(op, 0);
        }
        if (!blocked) break;
        // Out of room: ask the peer to wake us when it frees slots, then look once more in
        // case it already did (the flag may have come too late for it to see).
        if (!conn.tx.block_producer(std::max<std::uint32_t>(1, conn.tx.slot_count() / 2))) break;
    }
    if (!blocked) conn.tx.unblock_producer();
    if (moved) announce(conn);
    return moved;
}

// --- receiving ---

int ShmMethod::receive_messages(Connection& conn, bool& moved) {
    Ring& ring = conn.rx;
    conn.stalled = false;
    bool consumed = false;
    int rc = 0;
    for (std::uint32_t i = 0; i < ring.slot_count(); ++i) {
        if (!ring.has_message()) break;
        MsgHeader header;
        ring.peek(1).read(0, &header, sizeof header);
        if (check_record(ring, header) < 0) {
            BMI_LOG(error,
                    "shm: malformed message header (type %u, %u slots, size %llu) from pid %d "
                    "on connection %llu; closing it",
                    header.type, header.slots, static_cast<unsigned long long>(header.size),
                    static_cast<int>(conn.peer_pid), static_cast<unsigned long long>(conn.id));
            rc = -BMI_EPROTO;
            break;
        }
        rc = handle_message(conn, header, ring.peek(header.slots));
        if (rc == 1) {  // no quota or early budget for it: leave it in the ring
            conn.stalled = true;
            rc = 0;
            break;
        }
        if (rc != 0) break;
        ring.release(header.slots);
        consumed = true;
    }
    if (consumed) {
        moved = true;
        ++conn.receipts;
        if (ring.producer_waiting()) conn.write_peer_event();
    }
    return rc;
}

int ShmMethod::handle_message(Connection& conn, const MsgHeader& header, const Window& window) {
    ShmPeer& peer = *conn.peer;
    switch (static_cast<MsgType>(header.type)) {
        case MsgType::eager:
            return match_inline(conn, header, window) ? 0 : 1;
        case MsgType::unexpected:
            return deliver_unexpected(conn, header, window);
        case MsgType::rts: {
            if (header.size > static_cast<std::uint64_t>(max_message_size())) return -BMI_EPROTO;
            std::vector<RemoteIov> iovs(static_cast<std::size_t>(header.aux));
            window.read(header_size, iovs.data(), iovs.size() * sizeof(RemoteIov));
            auto size = static_cast<bmi_size_t>(header.size);
            if (Operation* op = peer.posted_recvs.take_first(header.tag)) {
                ops_.unplace(*op);
                copies_.start_transfer(conn, *op, size, header.cookie, std::move(iovs));
                return 0;
            }
            if (!early_fits(peer, iovs.size() * sizeof(RemoteIov))) return 1;
            Arrival m;
            m.type = MsgType::rts;
            m.tag = header.tag;
            m.size = size;
            m.iovs = std::move(iovs);
            m.cookie = header.cookie;
            m.connection = conn.id;
            keep_arrival(peer, std::move(m));
            return 0;
        }
        default:
            return handle_reply(conn, header);
    }
}

int ShmMethod::handle_reply(Connection& conn, const MsgHeader& header) {
    auto type = static_cast<MsgType>(header.type);
    if (type == MsgType::data) {
        auto it = conn.receives.find(header.cookie);
        if (it == conn.receives.end()) return -BMI_EPROTO;
        Operation& op = *it->second.op;
        if (static_cast<bmi_size_t>(header.size) > op.actual_size - op.transferred)
            return -BMI_EPROTO;
        scatter(conn.rx.peek(header.slots), header_size, segments_of(op),
                static_cast<std::uint64_t>(op.transferred), static_cast<std::size_t>(header.size));
        op.transferred += static_cast<bmi_size_t>(header.size);
        if (op.transferred == op.actual_size) {
            copies_.timed(LargePath::stream, op.actual_size, it->second.started_ns);
            copies_.took(TakenPath::stream, op.actual_size);
            conn.receives.erase(it);
            ops_.finish(op, 0);
        }
        return 0;
    }
    auto it = conn.sends.find(header.cookie);
    if (it == conn.sends.end()) return -BMI_EPROTO;
    Operation& op = *it->second;
    switch (type) {
        case MsgType::cts:
            if (header.size > static_cast<std::uint64_t>(op.total_size)) return -BMI_EPROTO;
            conn.sends.erase(it);
            answered(conn, op, false);
            op.transferred = static_cast<bmi_size_t>(header.size);
            conn.streams.push_back(&op);
            return 0;
        case MsgType::help:
            answered(conn, op, true);
            return copies_.on_help(conn, op, header);
        case MsgType::done:
            conn.sends.erase(it);
            answered(conn, op, false);
            copies_.drop_pushes(conn, op);
            op.actual_size = op.total_size;
            ops_.finish(op, 0);
            return 0;
        case MsgType::nak: {
            conn.sends.erase(it);
            answered(conn, op, false);
            copies_.drop_pushes(conn, op);
            int error = support::find_error(header.aux) != nullptr && header.aux < 0 ? header.aux
                                                                                     : -BMI_EPROTO;
            ops_.finish(op, error);
            return 0;
        }
        default:
            return -BMI_EPROTO;
    }
}

bool ShmMethod::match_inline(Connection& conn, const MsgHeader& header, const Window& window) {
    ShmPeer& peer = *conn.peer;
    auto size = static_cast<std::size_t>(header.size);
    if (Operation* op = peer.posted_recvs.take_first(header.tag)) {
        if (static_cast<bmi_size_t>(size) > op->total_size) {
            op->actual_size = 0;
            ops_.finish(*op, -BMI_EMSGSIZE);
            return true;
        }
        scatter(window, header_size, segments_of(*op), 0, size);
        op->actual_size = static_cast<bmi_size_t>(size);
        ops_.finish(*op, 0);
        return true;
    }
    // Nobody waits yet: keep a copy, so the ring slots go back to the sender at once, while
    // the budgets allow. Past them the peer's sends wait in its ring for our receives.
    if (!early_fits(peer, size)) return false;
    Arrival m;
    m.type = MsgType::eager;
    m.tag = header.tag;
    m.size = static_cast<bmi_size_t>(size);
    m.payload.resize(size);
    window.read(header_size, m.payload.data(), size);
    keep_arrival(peer, std::move(m));
    return true;
}

namespace {
std::size_t early_cost(const Arrival& message) {
    return message.payload.size() + message.iovs.size() * sizeof(RemoteIov);
}
}  // namespace

bool ShmMethod::early_fits(const ShmPeer& peer, std::size_t bytes) const {
    return early_.fits(peer.early, static_cast<std::int64_t>(bytes));
}

void ShmMethod::keep_arrival(ShmPeer& peer, Arrival&& message) {
    early_.charge(peer.early, static_cast<std::int64_t>(early_cost(message)));
    peer.arrivals.push(std::move(message));
}

void ShmMethod::uncharge(ShmPeer& peer, const Arrival& message) {
    early_.release(peer.early, static_cast<std::int64_t>(early_cost(message)));
    // A ring left unread for want of budget (receive_messages) is read again once we wake;
    // such a connection is busy (Connection::needs_visit), so only the busy ones need a look.
    if (visits_.any_stalled()) wake_self();
}

int ShmMethod::deliver_unexpected(Connection& conn, const MsgHeader& header, const Window& window) {
    auto size = static_cast<bmi_size_t>(header.size);
    // Our limit, not the ring's: a peer with larger rings or another setting could place more,
    // and a server sizes what it holds for unexpected messages by its own limit (tcp refuses
    // the same frame).
    // An initiator sends up to the common limit before our reply tells it ours.
    const bmi_size_t limit = conn.initiator
                                 ? options_.unexpected_limit
                                 : std::max(options_.unexpected_limit, default_unexpected_limit);
    if (size > limit) {
        BMI_LOG(error,
                "shm: unexpected message of %lld bytes from pid %d on connection %llu is above "
                "this instance's limit of %lld; closing it",
                static_cast<long long>(size), static_cast<int>(conn.peer_pid),
                static_cast<unsigned long long>(conn.id), static_cast<long long>(limit));
        return -BMI_EPROTO;
    }
    void* buffer = sink_.alloc_unexpected(*conn.peer, size);
    if (buffer == nullptr) return 1;
    window.read(header_size, buffer, static_cast<std::size_t>(size));
    if (conn.peer->addr() == 0) sink_.register_peer(conn.peer.shared());
    // check_record checked that aux fits a class.
    sink_.deliver_unexpected(conn.peer.shared(), buffer, size, header.tag,
                             static_cast<std::uint8_t>(header.aux));
    return 0;
}

}  // namespace bmi::method::shm
