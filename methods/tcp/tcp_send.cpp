// SPDX-License-Identifier: LGPL-2.1-or-later
// Output side of a connection: picks the next frames and writes them with vectored sendmsg,
// several small frames in one call (a burst of sends costs one system call, not one each).
//
// Frame order on a connection: control frames (HELLO, CTS, NAK, GRANT) first, then the
// headers of queued sends in post order (eager, unexpected, RTS), then one DATA chunk of a
// cleared rendezvous. After every chunk the choice starts over, so small messages posted
// behind a huge one overtake its data and never wait for it (no head-of-line blocking between
// libbmi peers). Matching order is the order of headers, which this keeps. A GRANT waiting on
// the connection joins the control frames of whatever write comes next (tcp_grants.cpp).
#include <algorithm>
#include <cerrno>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

namespace {

// One sendmsg carries frames until this many payload and header bytes are gathered (a larger
// frame still goes whole) or the iovec array is full: enough to turn a burst of small
// messages into one system call, small enough that a large message behind them does not wait
// for a long gather.
constexpr std::size_t batch_bytes = 64 * 1024;
constexpr int batch_frames = 64;
// Each frame takes its head, its body and at most iov_batch pieces of payload.
constexpr int frame_iov_max = iov_batch + 2;
constexpr int batch_iov_max = 2 * batch_frames + iov_batch;

}  // namespace

void TcpMethod::flush(Connection& c) {
    if (c.closed || c.state == ConnState::connecting) return;
    if (c.has_output()) queue_grants(c);
    iovec iov[batch_iov_max];
    while (!c.closed) {
        // Gather the frames already taken, then more from the queues while they fit.
        int n = 0;
        std::size_t gathered = 0;
        std::size_t frames = 0;
        while (true) {
            if (frames == c.writer.out.size() && !next_frame(c)) break;
            const OutFrame& f = c.writer.out[frames];
            const std::size_t before = gathered;
            n += f.unwritten_iov(iov + n, gathered);
            ++frames;
            // A frame not covered whole (more segments than iov_batch) must end the batch:
            // the next frame's bytes would land where the rest of its payload belongs.
            const bool whole = gathered - before == f.total() - f.done;
            if (!whole || gathered >= batch_bytes || frames >= batch_frames ||
                n + frame_iov_max > batch_iov_max || f.kind == OutKind::data_chunk)
                break;
        }
        if (n == 0) {
            // Sealed records the socket did not take yet go out even with no frame behind them.
            if (c.records && c.records->flush(c.fd) < 0) {
                connection_broken(c, support::bmi_error_from_errno(errno));
                return;
            }
            release_sealed(c);
            break;
        }
        const ssize_t written = write_vector(c, iov, n);
        if (written < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            connection_broken(c, support::bmi_error_from_errno(errno));
            return;
        }
        ++c.writer.writes_with_data;
        auto left = static_cast<std::size_t>(written);
        while (left > 0 && !c.closed && c.writer.advance_front(left)) {
            if (c.records)
                c.writer.sealed.push_back(c.writer.pop_written());
            else
                frame_written(c, c.writer.pop_written());
        }
        release_sealed(c);
        // A short write means the socket is full for now (records: or sealed ones wait).
        if (static_cast<std::size_t>(written) < gathered &&
            (!c.records || c.records->pending_out()))
            break;
    }
    c.note_write_end();
    update_interest(c);
}

bool TcpMethod::next_frame(Connection& c) {
    if (c.writer.take_control()) return true;
    if (c.state != ConnState::established) return false;
    while (!c.writer.small_queue.empty()) {
        Operation& op = c.writer.small_queue.front();
        const bool untold = op.kind == OpKind::send_unexpected &&
                            unexpected_fit(c, op.total_size) == UnexpectedFit::waits;
        if ((c.offering && needs_v2(op)) || untold) {
            // Only v2 carries it whole, or only the peer's hello tells whether it takes an
            // unexpected message this large. Before any offer went out, ask with HELLO as
            // toward an unknown acceptor; after one, the acceptor's answer is on its way (or
            // never comes from an OrangeFS server), as is an offering client's HELLO after
            // our answer: the stall clock bounds the wait.
            if (c.offering && !c.offer_made) {
                start_hello(c);
                return next_frame(c);
            }
            if (!c.held_for_answer) restart_stall_clock(c);  // the answer is owed from now
            c.held_for_answer = true;
            return false;
        }
        c.writer.small_queue.pop_front();
        if (frame_for_small(c, op)) return true;
    }
    if (c.writer.data_queue.empty()) return false;
    Operation& op = c.writer.data_queue.front();
    c.writer.data_queue.pop_front();
    OutFrame f;
    f.kind = OutKind::data_chunk;
    f.op = &op;
    f.offset = op.transferred;
    f.length = std::min(data_chunk_limit, op.total_size - op.transferred);
    Header h;
    h.mode = Mode::data;
    h.tag = wire_tag(op.tag);
    h.size = static_cast<std::uint64_t>(f.length);
    h.cookie = slots(op).cookie;
    f.head_length = encode_header(h, Framing::v2, f.head.data());
    place(op, Place::send_writing);
    c.writer.out.push_back(std::move(f));
    return true;
}

TcpMethod::UnexpectedFit TcpMethod::unexpected_fit(const Connection& c, bmi_size_t size) {
    if (c.peer_unexpected_limit != 0)
        return size > c.peer_unexpected_limit ? UnexpectedFit::too_large : UnexpectedFit::goes;
    // The client we answered says its limit in the HELLO that follows.
    if (c.await_hello) return UnexpectedFit::waits;
    // An OrangeFS server never answers, and takes what OrangeFS takes; a libbmi one answers
    // at once with its limit. Within that same size the message need not wait for the answer.
    if (c.offering && size > default_unexpected_limit) return UnexpectedFit::waits;
    return UnexpectedFit::goes;
}

// Builds the first frame of a queued send; false if the op failed instead.
bool TcpMethod::frame_for_small(Connection& c, Operation& op) {
    if (op.kind == OpKind::send_unexpected &&
        unexpected_fit(c, op.total_size) == UnexpectedFit::too_large) {
        finish(op, -BMI_EMSGSIZE);
        return false;
    }
    OutFrame f;
    f.op = &op;
    f.kind = OutKind::message;
    f.length = op.total_size;
    Header h = message_header(c, op.kind, op.tag, op.total_size, op.msg_class);
    // An unexpected message is one UNEXPECTED frame whatever its framing (its limit was
    // checked at post); an expected one too large for EAGER is REND on legacy framing, RTS
    // on v2.
    if (op.kind == OpKind::send && op.total_size > eager_bound(c)) {
        if (c.framing != Framing::v2) {
            // What OrangeFS accepts: rendezvous with inline payload up to 16 MiB.
            if (op.total_size > legacy_message_limit) {
                finish(op, -BMI_EMSGSIZE);
                return false;
            }
            h.mode = Mode::rendezvous;
        } else if (auto grant = take_grant(c, op.total_size)) {
            // The receiver reserved room for it (tcp_grants.cpp): one EAGER frame, no RTS.
            h.cookie = grant->cookie;
            f.grant = *grant;
        } else {
            h.mode = Mode::rts;
            h.cookie = next_cookie_++;
            slots(op).cookie = h.cookie;
            f.kind = OutKind::rts;
            f.length = 0;
        }
    }
    f.head_length = encode_header(h, c.framing, f.head.data());
    c.offer_made = c.offer_made || c.offering;
    place(op, Place::send_writing);
    c.writer.out.push_back(std::move(f));
    return true;
}

void TcpMethod::release_sealed(Connection& c) {
    if (!c.records || c.records->pending_out()) return;
    while (!c.closed && !c.writer.sealed.empty()) {
        OutFrame f = std::move(c.writer.sealed.front());
        c.writer.sealed.pop_front();
        frame_written(c, std::move(f));
    }
}

void TcpMethod::frame_written(Connection& c, OutFrame f) {
    if (f.op == nullptr) return;
    Operation& op = *f.op;
    switch (f.kind) {
        case OutKind::control:
            return;
        case OutKind::message:
            op.actual_size = op.total_size;
            finish(op, 0);
            return;
        case OutKind::rts: {
            // When the receiver must have answered by (Limits::rendezvous_timeout).
            const auto deadline = std::chrono::steady_clock::now() + limits_.rendezvous_timeout;
            slots(op).rts_deadline = deadline;
            // The connection's entry stands for its earliest unanswered RTS.
            timers_.schedule_by({c.id, kit::DeadlineKind::rendezvous}, deadline);
            c.writer.await_cts.emplace(slots(op).cookie, &op);
            place(op, Place::send_await_cts);
            return;
        }
        case OutKind::data_chunk:
            op.transferred += f.length;
            if (op.transferred >= op.total_size) {
                op.actual_size = op.total_size;
                finish(op, 0);
            } else {
                c.writer.data_queue.push_back(op);  // to the back: transfers share the link in turn
                place(op, Place::send_data);
            }
            return;
    }
}

ssize_t TcpMethod::write_vector(Connection& c, const iovec* iov, int n) {
    return c.records ? c.records->write(c.fd, iov, n) : send_vector(c.fd, iov, n);
}

void TcpMethod::queue_control(Connection& c, Mode mode, bmi_msg_tag_t tag, std::uint64_t cookie,
                              bmi_size_t size) {
    OutFrame f;
    f.kind = OutKind::control;
    Header h;
    h.mode = mode;
    h.tag = wire_tag(tag);
    h.size = static_cast<std::uint64_t>(size);
    h.cookie = cookie;
    f.head_length = encode_header(h, Framing::v2, f.head.data());
    c.writer.control_queue.push_back(std::move(f));
}

}  // namespace bmi::method::tcp
