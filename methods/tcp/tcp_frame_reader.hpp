// SPDX-License-Identifier: LGPL-2.1-or-later
// The input half of a tcp connection: the frame being read, its read-ahead and its stall clock.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "methods/kit/deadlines.hpp"
#include "methods/method.hpp"
#include "methods/tcp/tcp_socket.hpp"
#include "methods/tcp/tcp_wire.hpp"

namespace bmi::method::tcp {

enum class ReadPhase : std::uint8_t {
    header,           // collecting a header
    body_scratch,     // eager, unexpected or HELLO payload into scratch (each bounded)
    body_op,          // DATA chunk or legacy rendezvous payload straight into read_op
    discard,          // payload nobody can take (receive too small): drop it
    wait_unexpected,  // alloc_unexpected said no: EPOLLIN off, retried every progress()
    wait_match,       // legacy rendezvous without a receive: EPOLLIN off until one is posted
    wait_early,       // header read, but the peer's early-data budget is spent: EPOLLIN off
                      // until a receive claims some of it (TcpMethod::resume_paused)
};

// What a read completed (FrameReader::advance); the method acts on it.
enum class ReadEvent : std::uint8_t {
    none,          // the piece is not whole yet
    header,        // head holds a whole header
    scratch_body,  // scratch holds the whole payload of `header`
    op_body,       // read_op has the whole payload; end_body() hands it over
};

// Big enough for a header and a typical eager payload in one read; small enough that the
// payload bytes a DATA header drags into it (and that must be copied once more) stay a few
// percent of a chunk.
inline constexpr std::size_t read_ahead_size = 32 * 1024;

// Holds no socket and calls nothing of the method: TcpMethod reads the socket and acts on the
// events, this keeps the cursor of the frame and of the read-ahead.
struct FrameReader {
    ReadPhase phase = ReadPhase::header;
    std::array<std::uint8_t, max_header_size> head{};
    std::size_t head_have = 0;
    Header header;  // the frame whose body is being read
    // The grant the frame being read came under (0: none). Its reservation stays charged
    // until the body has landed: in a receive, or buffered as an arrival that keeps the charge.
    bmi_size_t frame_grant = 0;
    // What the frame being read holds against its peer's early-data budget since its header
    // was admitted (0: nothing): a body that arrives slowly is paid for before its buffer is
    // sized, not when it is whole. Kept by the arrival it becomes, or given back.
    bmi_size_t early_reserved = 0;
    std::vector<std::uint8_t> scratch;
    std::size_t scratch_have = 0;
    Operation* read_op = nullptr;  // body_op target
    bmi_size_t body_left = 0;      // body_op, discard: bytes of this frame still to read
    // The peer owes us bytes (Connection::partial()): it must move some within the stall
    // timeout (TcpMethod::on_deadline), counted by reads_with_data, without a clock reading
    // per read.
    kit::ProgressDeadline stall_clock;
    // Read-ahead for small frames: one recv() usually brings a header with its eager payload
    // (and often the next frame too), instead of one system call per piece. Large payloads
    // (DATA chunks, legacy rendezvous bodies) bypass it and land straight in the receive.
    std::unique_ptr<std::uint8_t[]> inbuf;
    std::size_t in_pos = 0;
    std::size_t in_end = 0;
    bool drained = false;  // the last read came back short: the socket is empty for now
    std::uint64_t reads_with_data = 0;  // read_socket calls that brought bytes
    // How long a read that sleeps on the socket (TcpMethod::sleep_in_read) may take at most:
    // 0 until the first such sleep puts the socket in blocking mode, negative if it could not.
    std::chrono::microseconds read_wait_bound{0};
    // Out of the epoll set while the method sleeps in its read (TcpMethod::detach): every
    // progress pass reads it by hand, and it goes back before any sleep in epoll.
    bool detached = false;
    // The last header announced a payload too large for the read-ahead (or, RTS, a transfer whose
    // DATA brings one): the next header is read alone, because a header read through the read-ahead
    // drags up to 32 KiB of its payload along, and every byte of that must be copied once more
    // (doc/perf/code-figures.md). A payload read straight into its receive takes only the next
    // header along (see TcpMethod::read_socket).
    bool header_alone = false;
    // Receives cleared by our CTS, keyed by the sender's cookie; DATA frames fill them.
    std::unordered_map<std::uint64_t, Operation*> incoming;

    // Reading is stopped until something on our side changes (memory, a posted receive).
    bool paused() const {
        return phase == ReadPhase::wait_unexpected || phase == ReadPhase::wait_match ||
               phase == ReadPhase::wait_early;
    }
    // Mid-frame, or DATA owed for a transfer we cleared with CTS (paused() aside).
    bool owes_bytes() const {
        return phase != ReadPhase::header || head_have > 0 || !incoming.empty();
    }
    // Between frames with no transfer cleared: closing loses nothing of ours.
    bool at_rest() const { return !owes_bytes(); }
    std::span<const std::uint8_t> head_bytes() const { return {head.data(), head_have}; }

    // --- read-ahead ---
    bool has_buffered() const { return in_pos < in_end; }
    std::size_t buffered() const { return in_end - in_pos; }
    // The read-ahead buffer, allocated on first use.
    std::uint8_t* read_ahead() {
        if (!inbuf) inbuf = std::make_unique<std::uint8_t[]>(read_ahead_size);
        return inbuf.get();
    }
    // Copies buffered input into iov, in order; returns the bytes moved.
    std::size_t take_buffered(const iovec* iov, int n) {
        std::size_t moved = 0;
        for (int i = 0; i < n && in_pos < in_end; ++i) {
            const std::size_t chunk = std::min(iov[i].iov_len, in_end - in_pos);
            std::memcpy(iov[i].iov_base, inbuf.get() + in_pos, chunk);
            in_pos += chunk;
            moved += chunk;
            if (chunk < iov[i].iov_len) break;
        }
        return moved;
    }
    // A read of `count` bytes came back. Direct, the first `want` went into iov and the rest
    // (at most `ahead`) to the start of the read-ahead; otherwise all went to the read-ahead
    // and iov is served from it. Returns the bytes iov received.
    std::size_t land_read(std::size_t count, std::size_t want, std::size_t ahead, bool direct,
                          const iovec* iov, int n) {
        ++reads_with_data;
        drained = count < (direct ? want : 0) + ahead;
        in_pos = 0;
        if (!direct) {
            in_end = count;
            return take_buffered(iov, n);
        }
        in_end = count > want ? count - want : 0;
        return std::min(count, want);
    }

    // --- frame cursor ---
    // Where the bytes the current phase waits for go: the pieces used, 0 while paused.
    // `header_size` is what the header needs in all; `sink` takes discarded payload.
    int next_iov(iovec* iov, std::size_t header_size, std::uint8_t* sink, std::size_t sink_size) {
        switch (phase) {
            case ReadPhase::header:
                iov[0] = {head.data() + head_have, header_size - head_have};
                return 1;
            case ReadPhase::body_scratch:
                iov[0] = {scratch.data() + scratch_have, scratch.size() - scratch_have};
                return 1;
            case ReadPhase::body_op:
                return segment_iov(*read_op, read_op->transferred, body_left, iov, iov_batch);
            case ReadPhase::discard:
                iov[0] = {sink, static_cast<std::size_t>(std::min<bmi_size_t>(
                                    body_left, static_cast<bmi_size_t>(sink_size)))};
                return 1;
            case ReadPhase::wait_unexpected:
            case ReadPhase::wait_match:
            case ReadPhase::wait_early:
                break;
        }
        return 0;
    }
    // `count` bytes landed where next_iov pointed. In the header phase, `header_size` gives
    // what the header needs once they are in (a standalone magic asks one byte more).
    template <typename HeaderSize>
    ReadEvent advance(std::size_t count, HeaderSize header_size) {
        switch (phase) {
            case ReadPhase::header:
                head_have += count;
                return head_have == header_size(head_bytes()) ? ReadEvent::header : ReadEvent::none;
            case ReadPhase::body_scratch:
                scratch_have += count;
                return scratch_have == scratch.size() ? ReadEvent::scratch_body : ReadEvent::none;
            case ReadPhase::body_op:
                read_op->transferred += static_cast<bmi_size_t>(count);
                body_left -= static_cast<bmi_size_t>(count);
                return body_left == 0 ? ReadEvent::op_body : ReadEvent::none;
            case ReadPhase::discard:
                body_left -= static_cast<bmi_size_t>(count);
                if (body_left == 0) phase = ReadPhase::header;
                return ReadEvent::none;
            default:
                return ReadEvent::none;
        }
    }
    // The whole header in head, decoded; head is free for the next one.
    const Header& take_header(Framing framing) {
        header = decode_header(head.data(), framing);
        head_have = 0;
        return header;
    }
    void start_scratch(std::size_t size) {
        scratch.resize(size);
        scratch_have = 0;
    }
    void start_body(Operation& op, bmi_size_t size) {
        read_op = &op;
        body_left = size;
        phase = ReadPhase::body_op;
    }
    void start_discard(bmi_size_t size) {
        body_left = size;
        phase = ReadPhase::discard;
    }
    // The body_op frame is whole: its receive, and the reader back at a header.
    Operation* end_body() {
        phase = ReadPhase::header;
        return std::exchange(read_op, nullptr);
    }
    // Bytes of our memory it holds (the read-ahead and scratch).
    std::size_t memory() const { return (inbuf ? read_ahead_size : 0) + scratch.capacity(); }
    // On close: the receives it was filling, appended to `failed`; none is kept.
    void release_ops(std::vector<Operation*>& failed) {
        for (auto& [cookie, op] : incoming) failed.push_back(op);
        incoming.clear();
        if (phase == ReadPhase::body_op && read_op != nullptr) failed.push_back(read_op);
        read_op = nullptr;
    }
};

}  // namespace bmi::method::tcp
