// SPDX-License-Identifier: LGPL-2.1-or-later
// Output side of a connection: picks the next frame and writes it with vectored sendmsg.
//
// Frame order on a connection: control frames (HELLO, CTS, NAK) first, then the headers of
// queued sends in post order (eager, unexpected, RTS), then one DATA chunk of a cleared
// rendezvous. After every chunk the choice starts over, so small messages posted behind a huge
// one overtake its data and never wait for it (no head-of-line blocking between libbmi peers).
// Matching order is the order of headers, which this keeps.
#include <cerrno>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

void TcpMethod::flush(Connection& c) {
    if (c.closed || c.state == ConnState::connecting) return;
    iovec iov[iov_batch + 2];
    while (!c.closed) {
        if (!c.out && !next_frame(c)) break;
        OutFrame& f = *c.out;
        int n = 0;
        std::size_t skip = f.done;
        if (skip < f.head_length) {
            iov[n++] = {f.head.data() + skip, f.head_length - skip};
            skip = 0;
        } else {
            skip -= f.head_length;
        }
        if (skip < f.body.size()) {
            iov[n++] = {f.body.data() + skip, f.body.size() - skip};
            skip = 0;
        } else {
            skip -= f.body.size();
        }
        if (f.op != nullptr && f.length > 0) {
            const auto off = static_cast<bmi_size_t>(skip);
            n += segment_iov(*f.op, f.offset + off, f.length - off, iov + n, iov_batch);
        }
        const ssize_t written = send_vector(c.fd, iov, n);
        if (written < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            connection_broken(c, support::bmi_error_from_errno(errno));
            return;
        }
        f.done += static_cast<std::size_t>(written);
        if (f.done == f.total()) frame_written(c);
    }
    update_interest(c);
}

bool TcpMethod::next_frame(Connection& c) {
    if (!c.control_queue.empty()) {
        c.out = std::move(c.control_queue.front());
        c.control_queue.pop_front();
        return true;
    }
    if (c.state != ConnState::established) return false;
    while (!c.small_queue.empty()) {
        Operation& op = c.small_queue.front();
        c.small_queue.pop_front();
        if (frame_for_small(c, op)) return true;
    }
    if (c.data_queue.empty()) return false;
    Operation& op = c.data_queue.front();
    c.data_queue.pop_front();
    OutFrame f;
    f.kind = OutKind::data_chunk;
    f.op = &op;
    f.offset = op.transferred;
    f.length = std::min(data_chunk_limit, op.total_size - op.transferred);
    Header h;
    h.mode = Mode::data;
    h.tag = wire_tag(op.tag);
    h.size = static_cast<std::uint64_t>(f.length);
    h.cookie = op.method_word;
    f.head_length = encode_header(h, Framing::v2, f.head.data());
    place(op, Place::send_writing);
    c.out = std::move(f);
    return true;
}

// Builds the first frame of a queued send; false if the op failed instead.
bool TcpMethod::frame_for_small(Connection& c, Operation& op) {
    OutFrame f;
    f.op = &op;
    f.kind = OutKind::message;
    f.length = op.total_size;
    Header h;
    h.magic = magic_of(c.framing);
    h.tag = wire_tag(op.tag);
    h.size = static_cast<std::uint64_t>(op.total_size);
    if (op.kind == OpKind::send_unexpected) {
        h.mode = Mode::unexpected;
        // An OrangeFS header has no room for it: such a peer knows no classes anyway.
        h.msg_class = op.msg_class;
    } else if (c.framing != Framing::v2) {
        // What OrangeFS accepts: eager up to 16 KiB, rendezvous with inline payload up to 16 MiB.
        if (op.total_size > legacy_message_limit) {
            finish(op, -BMI_EMSGSIZE);
            return false;
        }
        h.mode = op.total_size <= eager_limit ? Mode::eager : Mode::rendezvous;
    } else if (op.total_size <= v2_eager_limit) {
        h.mode = Mode::eager;
    } else {
        h.mode = Mode::rts;
        h.cookie = next_cookie_++;
        op.method_word = h.cookie;
        f.kind = OutKind::rts;
        f.length = 0;
    }
    f.head_length = encode_header(h, c.framing, f.head.data());
    place(op, Place::send_writing);
    c.out = std::move(f);
    return true;
}

void TcpMethod::frame_written(Connection& c) {
    OutFrame f = std::move(*c.out);
    c.out.reset();
    if (f.op == nullptr) return;
    Operation& op = *f.op;
    switch (f.kind) {
        case OutKind::control:
            return;
        case OutKind::message:
            op.actual_size = op.total_size;
            finish(op, 0);
            return;
        case OutKind::rts:
            // When the receiver must have answered by (Limits::rendezvous_timeout).
            op.method_aux = static_cast<std::uint64_t>(
                (std::chrono::steady_clock::now() + limits_.rendezvous_timeout)
                    .time_since_epoch()
                    .count());
            c.await_cts.emplace(op.method_word, &op);
            place(op, Place::send_await_cts);
            return;
        case OutKind::data_chunk:
            op.transferred += f.length;
            if (op.transferred >= op.total_size) {
                op.actual_size = op.total_size;
                finish(op, 0);
            } else {
                c.data_queue.push_back(op);  // to the back: transfers share the link in turn
                place(op, Place::send_data);
            }
            return;
    }
}

void TcpMethod::queue_control(Connection& c, Mode mode, bmi_msg_tag_t tag, std::uint64_t cookie) {
    OutFrame f;
    f.kind = OutKind::control;
    Header h;
    h.mode = mode;
    h.tag = wire_tag(tag);
    h.cookie = cookie;
    f.head_length = encode_header(h, Framing::v2, f.head.data());
    c.control_queue.push_back(std::move(f));
}

}  // namespace bmi::method::tcp
