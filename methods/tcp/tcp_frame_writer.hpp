// SPDX-License-Identifier: LGPL-2.1-or-later
// The output half of a tcp connection: its queues, the frames taken for writing, its send clock.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/method.hpp"
#include "methods/tcp/tcp_peer.hpp"
#include "methods/tcp/tcp_socket.hpp"
#include "methods/tcp/tcp_wire.hpp"

namespace bmi::method::tcp {

// Sends below this size posted between two progress calls leave together in one sendmsg
// (post_send); a larger one is written as soon as its connection is idle.
inline constexpr bmi_size_t burst_message_limit = 32 * 1024;

enum class OutKind : std::uint8_t {
    control,     // CTS, NAK, GRANT, HELLO, HELLO_ACK: bytes only
    message,     // eager, unexpected or legacy rendezvous: the op completes when written
    rts,         // the op then waits for CTS or NAK
    data_chunk,  // one DATA chunk of op
};

// Room for one message of up to `size` bytes, named by `cookie` (tcp_grants.cpp).
struct Grant {
    std::uint64_t cookie = 0;  // 0: none
    bmi_size_t size = 0;
    bool sent = false;  // one of ours: written to the peer, so an EAGER frame may name it
};

struct OutFrame {
    OutKind kind = OutKind::control;
    std::array<std::uint8_t, max_header_size> head{};
    std::size_t head_length = 0;
    std::vector<std::uint8_t> body;  // control frames with a body (HELLO)
    Operation* op = nullptr;
    // The peer's GRANT this EAGER frame uses: back to grants_held if the frame is cancelled
    // before a byte of it is written.
    Grant grant;
    bmi_size_t offset = 0;  // payload range inside op
    bmi_size_t length = 0;
    std::size_t done = 0;  // bytes of head + body + payload already written
    // Begun by send_now, which left the rest to us: post() gives it its op (adopt_started).
    bool started = false;

    std::size_t total() const {
        return head_length + body.size() + static_cast<std::size_t>(length);
    }
    // Appends its unwritten rest to iov, at most iov_batch + 2 pieces; returns the pieces used
    // and adds the bytes they cover to `bytes` (less than the rest when the payload has more
    // than iov_batch segments).
    int unwritten_iov(iovec* iov, std::size_t& bytes) const {
        int n = 0;
        std::size_t skip = done;
        if (skip < head_length) {
            iov[n++] = {const_cast<std::uint8_t*>(head.data()) + skip, head_length - skip};
            skip = 0;
        } else {
            skip -= head_length;
        }
        if (skip < body.size()) {
            iov[n++] = {const_cast<std::uint8_t*>(body.data()) + skip, body.size() - skip};
            skip = 0;
        } else {
            skip -= body.size();
        }
        if (op != nullptr && length > 0) {
            const auto off = static_cast<bmi_size_t>(skip);
            n += segment_iov(*op, offset + off, length - off, iov + n, iov_batch);
        }
        for (int i = 0; i < n; ++i) bytes += iov[i].iov_len;
        return n;
    }
};

// Holds no socket and calls nothing of the method: TcpMethod builds the frames, writes them
// and completes their ops; this keeps what is queued, taken and written.
struct FrameWriter {
    // The socket did not take all we had for it: the peer must take some within the send
    // timeout (send_clock, TcpMethod::on_deadline); writes_with_data counts the writes that
    // moved bytes.
    bool write_blocked = false;
    std::uint64_t writes_with_data = 0;
    kit::ProgressDeadline send_clock;
    std::deque<OutFrame> control_queue;
    OpList small_queue;  // sends whose header is not written yet, in post order
    std::unordered_map<std::uint64_t, Operation*> await_cts;  // RTS written, keyed by cookie
    OpList data_queue;  // sends cleared by CTS, served one chunk at a time
    // Frames taken from the queues for writing, in wire order; only the first may be partly
    // written. One sendmsg carries as many of them as fit (tcp_send.cpp, coalescing).
    std::deque<OutFrame> out;
    // Frames wholly sealed into records of which the socket has not taken all yet (an
    // encrypted connection). Their sends complete only once it has: until then nothing but
    // another progress call would move those bytes, and a caller with its send done may not
    // make one before the peer's stall timeout.
    std::deque<OutFrame> sealed;
    // The progress epoch (TcpMethod::progress_epoch_) of this connection's last write from
    // inside post(): a second send posted before the next progress call is queued instead, so
    // that a burst of sends leaves in one system call.
    std::uint64_t direct_write_epoch = 0;

    // Output that makes a write of its own. Sends wait in their queues until the connection is
    // `established`; `holding_small` keeps small_queue back (an upgrade answer is owed).
    bool has_output(bool established, bool holding_small) const {
        return !out.empty() || !control_queue.empty() ||
               (established && ((!small_queue.empty() && !holding_small) || !data_queue.empty()));
    }
    // After a write: output the socket did not take starts the send clock
    // (TcpMethod::watch_deadlines); writes that go through read no clock.
    void note_write_end(bool closed) { write_blocked = !out.empty() && !closed; }
    // Nothing queued, taken or waiting for a CTS: closing loses no send.
    bool at_rest() const {
        return out.empty() && sealed.empty() && control_queue.empty() && small_queue.empty() &&
               data_queue.empty() && await_cts.empty();
    }
    // Control frames go first: the oldest one is taken for writing, if any.
    bool take_control() {
        if (control_queue.empty()) return false;
        out.push_back(std::move(control_queue.front()));
        control_queue.pop_front();
        return true;
    }
    // `left` bytes of a write went out: the first frame takes its share of them. True if
    // that frame is now whole (pop_written hands it over); `left` keeps the rest.
    bool advance_front(std::size_t& left) {
        OutFrame& f = out.front();
        const std::size_t take = std::min(left, f.total() - f.done);
        f.done += take;
        left -= take;
        return f.done == f.total();
    }
    OutFrame pop_written() {
        OutFrame f = std::move(out.front());
        out.pop_front();
        return f;
    }
    // On close: every send it holds, appended to `failed` in wire order (sealed frames, taken
    // ones, queued headers, DATA, then those waiting for CTS); all its queues are empty after.
    void release_ops(std::vector<Operation*>& failed) {
        for (const OutFrame& f : sealed)
            if (f.op != nullptr) failed.push_back(f.op);
        sealed.clear();
        for (const OutFrame& f : out)
            if (f.op != nullptr) failed.push_back(f.op);
        out.clear();
        control_queue.clear();
        while (!small_queue.empty()) {
            failed.push_back(&small_queue.front());
            small_queue.pop_front();
        }
        while (!data_queue.empty()) {
            failed.push_back(&data_queue.front());
            data_queue.pop_front();
        }
        for (auto& [cookie, op] : await_cts) failed.push_back(op);
        await_cts.clear();
    }
};

}  // namespace bmi::method::tcp
