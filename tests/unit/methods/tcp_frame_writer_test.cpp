// SPDX-License-Identifier: LGPL-2.1-or-later
// The output half of a tcp connection without a socket: what the next write takes, how the
// bytes a write moved advance the frames, when there is output at all, and what closing hands
// back.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "methods/tcp/tcp_frame_writer.hpp"
#include "two_buffer_op.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;

namespace {
OutFrame control_frame(std::size_t head_length, std::uint8_t first_byte) {
    OutFrame f;
    f.head_length = head_length;
    f.head[0] = first_byte;
    return f;
}

// A send of 150 bytes from pieces of 100 and 50.
struct Send : bmi::test::TwoBufferOp {
    Send() : TwoBufferOp(OpKind::send, 100, 50) {}
};
}  // namespace

TEST_CASE("frame writer: control frames are taken for writing oldest first",
          "[tcp][frame_writer]") {
    FrameWriter w;
    CHECK_FALSE(w.take_control());
    w.control_queue.push_back(control_frame(24, 1));
    w.control_queue.push_back(control_frame(24, 2));
    REQUIRE(w.take_control());
    REQUIRE(w.take_control());
    CHECK_FALSE(w.take_control());
    REQUIRE(w.out.size() == 2);
    CHECK(w.out[0].head[0] == 1);
    CHECK(w.out[1].head[0] == 2);
    CHECK(w.control_queue.empty());
}

TEST_CASE("frame writer: a frame's unwritten rest skips what is done, head, body and payload",
          "[tcp][frame_writer]") {
    Send send;
    OutFrame f;
    f.kind = OutKind::message;
    f.head_length = 10;
    f.body.resize(5);
    f.op = &send.op;
    f.offset = 20;  // payload bytes 20..149 of the op
    f.length = 130;
    REQUIRE(f.total() == 145);
    f.done = 12;  // the head and 2 bytes of the body are out
    iovec iov[iov_batch + 2];
    std::size_t bytes = 0;
    REQUIRE(f.unwritten_iov(iov, bytes) == 3);
    CHECK(bytes == f.total() - f.done);
    CHECK(iov[0].iov_base == f.body.data() + 2);
    CHECK(iov[0].iov_len == 3);
    CHECK(iov[1].iov_base == send.a.data() + 20);
    CHECK(iov[1].iov_len == 80);
    CHECK(iov[2].iov_base == send.b.data());
    CHECK(iov[2].iov_len == 50);

    f.done = 15 + 90;  // into the second segment
    bytes = 0;
    REQUIRE(f.unwritten_iov(iov, bytes) == 1);
    CHECK(iov[0].iov_base == send.b.data() + 10);
    CHECK(bytes == 40);
}

TEST_CASE("frame writer: the bytes of one write complete frames in order", "[tcp][frame_writer]") {
    FrameWriter w;
    w.out.push_back(control_frame(24, 1));
    w.out.push_back(control_frame(32, 2));
    std::size_t left = 24 + 5;
    REQUIRE(w.advance_front(left));  // the first is whole
    CHECK(left == 5);
    OutFrame first = w.pop_written();
    CHECK(first.head[0] == 1);
    CHECK_FALSE(w.advance_front(left));  // the second has 5 of 32
    CHECK(left == 0);
    CHECK(w.out.front().done == 5);
    left = 100;  // more than it lacks: it takes only its own
    REQUIRE(w.advance_front(left));
    CHECK(left == 100 - 27);
    w.pop_written();
    CHECK(w.out.empty());
}

TEST_CASE("frame writer: what counts as output of its own", "[tcp][frame_writer]") {
    FrameWriter w;
    CHECK_FALSE(w.has_output(true, false));
    CHECK(w.at_rest());
    Send queued, cleared;
    w.small_queue.push_back(queued.op);
    // Sends wait for the handshake, and while an upgrade answer is owed.
    CHECK_FALSE(w.has_output(false, false));
    CHECK_FALSE(w.has_output(true, true));
    CHECK(w.has_output(true, false));
    CHECK_FALSE(w.at_rest());
    w.data_queue.push_back(cleared.op);
    CHECK(w.has_output(true, true));  // a cleared transfer is not held back
    CHECK_FALSE(w.has_output(false, true));
    // Control frames go out before the handshake is through (HELLO is one).
    w.control_queue.push_back(control_frame(24, 1));
    CHECK(w.has_output(false, true));

    // A write that left frames behind blocks; on a closed connection nothing is blocked.
    w.take_control();
    w.note_write_end(false);
    CHECK(w.write_blocked);
    w.note_write_end(true);
    CHECK_FALSE(w.write_blocked);
    w.pop_written();
    w.note_write_end(false);
    CHECK_FALSE(w.write_blocked);

    std::vector<Operation*> failed;
    w.release_ops(failed);
    CHECK(failed.size() == 2);
}

TEST_CASE("frame writer: closing hands back every send in wire order", "[tcp][frame_writer]") {
    FrameWriter w;
    Send taken, queued, data, awaiting;
    OutFrame f;
    f.kind = OutKind::message;
    f.head_length = 24;
    f.op = &taken.op;
    w.out.push_back(f);
    w.out.push_back(control_frame(24, 9));  // no op behind it
    w.control_queue.push_back(control_frame(24, 3));
    w.small_queue.push_back(queued.op);
    w.data_queue.push_back(data.op);
    w.await_cts.emplace(77, &awaiting.op);
    std::vector<Operation*> failed;
    w.release_ops(failed);
    REQUIRE(failed == std::vector<Operation*>{&taken.op, &queued.op, &data.op, &awaiting.op});
    CHECK(w.at_rest());
}
