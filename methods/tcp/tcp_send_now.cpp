// SPDX-License-Identifier: LGPL-2.1-or-later
// The control layer's fast path for a small send (Method::send_now): an idle, established
// connection takes the frame in one sendmsg before any operation, id or completion exists.
// A PVFS request or reply is such a send, and the machinery of a queued send (op cache, id
// table, send queue, frame list, completion queue) is a large part of what a small round trip
// costs (doc/perf/code-figures.md, "send_now").
#include <array>
#include <cstring>
#include <utility>

#include "methods/tcp/tcp_method_impl.hpp"

namespace bmi::method::tcp {

namespace {
// Larger sends take the usual path, which needs no copy: if the socket takes only part of the
// frame, send_now keeps a copy of the rest. That happens at most once each time the socket
// fills (later sends see the queued rest and go the usual way), so up to the v2 EAGER size
// the copy costs less than the operation it saves on every other send, whose path runs with
// cold caches (doc/perf/code-figures.md).
constexpr bmi_size_t send_now_limit = v2_eager_limit;
// Up to this payload the header and the payload are copied into one buffer and leave through
// send(), which costs less than a two-piece sendmsg() (tcp_socket.cpp) by more than the copy.
constexpr bmi_size_t coalesce_limit = 4 * 1024;

// Copies the segments one after the other to `to`.
void copy_segments(std::span<const Segment> segments, std::uint8_t* to) {
    for (const auto& s : segments) {
        if (s.size > 0) std::memcpy(to, s.data, static_cast<std::size_t>(s.size));
        to += s.size;
    }
}
}  // namespace

int TcpMethod::send_now(Peer& base, OpKind kind, bmi_msg_tag_t tag,
                        std::span<const Segment> segments) {
    bmi_size_t size = 0;
    for (const auto& s : segments) size += s.size;
    if (kind == OpKind::send_unexpected && size > unexpected_limit_) return -BMI_EMSGSIZE;
    if (size > send_now_limit || segments.size() > static_cast<std::size_t>(iov_batch)) return 0;
    auto& peer = static_cast<TcpPeer&>(base);
    Connection* c = peer.send_connection;
    // Anything queued goes first (messages keep their order), and only one direct write per
    // progress pass (post_send: a burst leaves in one sendmsg once the socket asks for more).
    // A GRANT waiting to ride along needs the usual path too: it writes the GRANT in front of
    // the message (a request posted after the receive for its large answer).
    if (c == nullptr || c->closed || c->state != ConnState::established || c->has_output() ||
        c->writer.direct_write_epoch == progress_epoch_ || c->grants_waiting())
        return 0;
    // Only what goes as one EAGER (or UNEXPECTED) frame: anything larger is a REND or RTS
    // frame, which only frame_for_small builds.
    if (kind == OpKind::send && size > eager_bound(*c)) return 0;
    if (kind == OpKind::send_unexpected) {
        const UnexpectedFit fit = unexpected_fit(*c, size);
        if (fit == UnexpectedFit::too_large) return -BMI_EMSGSIZE;
        if (fit == UnexpectedFit::waits) return 0;
    }
    c->writer.direct_write_epoch = progress_epoch_;

    // No class: the control layer sends classed messages through post().
    const Header h = message_header(*c, kind, tag, size, 0);
    std::array<std::uint8_t, max_header_size> head;
    const std::size_t head_length = encode_header(h, c->framing, head.data());
    c->offer_made = c->offer_made || c->offering;
    iovec iov[iov_batch + 1];
    int n = 0;
    std::array<std::uint8_t, max_header_size + coalesce_limit> whole;
    if (size <= coalesce_limit) {
        std::memcpy(whole.data(), head.data(), head_length);
        copy_segments(segments, whole.data() + head_length);
        iov[n++] = {whole.data(), head_length + static_cast<std::size_t>(size)};
    } else {
        iov[n++] = {head.data(), head_length};
        for (const auto& s : segments)
            if (s.size > 0) iov[n++] = {s.data, static_cast<std::size_t>(s.size)};
    }

    const ssize_t written = write_vector(*c, iov, n);
    const std::size_t total = head_length + static_cast<std::size_t>(size);
    const bool all_taken = written >= 0 && static_cast<std::size_t>(written) == total;
    if (all_taken && !(c->records && c->records->pending_out())) return 1;
    // Nothing went (a full socket, or an error the usual path will report with the op).
    if (written <= 0) return 0;
    // The socket did not take all of it, and what it took cannot be taken back. The rest waits
    // with us, so the send is not complete: its op, which post() is given next, completes when
    // the rest is written (Method::send_now_started).
    OutFrame frame;
    frame.kind = OutKind::message;
    frame.started = true;
    if (all_taken) {
        // Sealed whole: what of its records the socket did not take waits in the record layer.
        c->writer.sealed.push_back(std::move(frame));
    } else {
        // The rest is copied and written ahead of anything else: the caller's buffer is free.
        frame.head = head;
        frame.head_length = head_length;
        frame.body.resize(static_cast<std::size_t>(size));
        copy_segments(segments, frame.body.data());
        frame.done = static_cast<std::size_t>(written);
        c->writer.out.push_back(std::move(frame));
    }
    started_send_ = StartedSend{c->id, kind, tag, size};
    c->note_write_end();
    update_interest(*c);
    return send_now_started;
}

std::optional<int> TcpMethod::adopt_started(Operation& op) {
    const StartedSend started = *std::exchange(started_send_, std::nullopt);
    Connection* c = find_connection(started.connection);
    OutFrame* frame = nullptr;
    if (c != nullptr && !c->closed) {
        for (auto* queue : {&c->writer.sealed, &c->writer.out})
            if (!queue->empty() && queue->back().started) frame = &queue->back();
    }
    if (frame == nullptr) {
        // Written meanwhile, or its connection failed: then the op fails the usual way.
        if (c == nullptr || c->closed) return std::nullopt;
        op.actual_size = op.total_size;
        return 1;
    }
    frame->started = false;
    // The control layer posts the send it offered, so this holds; if it did not, the frame
    // completes with no op and this one goes the usual way.
    if (op.kind != started.kind || op.tag != started.tag || op.total_size != started.size)
        return std::nullopt;
    frame->op = &op;
    op.transferred = 0;
    op.actual_size = 0;
    slots(op).connection = c;
    place(op, Place::send_writing);
    return 0;
}

}  // namespace bmi::method::tcp
