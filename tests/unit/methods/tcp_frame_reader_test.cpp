// SPDX-License-Identifier: LGPL-2.1-or-later
// The input half of a tcp connection without a socket: the read-ahead hands out what one read
// brought, in order and never more; the frame cursor reports a header, a body or nothing as the
// bytes land; closing hands back every receive it was filling.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "methods/tcp/tcp_frame_reader.hpp"
#include "two_buffer_op.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;

namespace {
// Puts `count` bytes 0, 1, 2, ... into the read-ahead as one read would.
void fill_read_ahead(FrameReader& r, std::size_t count) {
    std::uint8_t* buf = r.read_ahead();
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<std::uint8_t>(i);
}

std::size_t header_need_v2(std::span<const std::uint8_t> have) {
    return header_bytes_needed(Dialect::v2, have);
}

// A receive of 10 bytes into pieces of 4 and 6.
struct TwoSegmentRecv : bmi::test::TwoBufferOp {
    TwoSegmentRecv() : TwoBufferOp(OpKind::recv, 4, 6) { op.actual_size = 10; }
};
}  // namespace

TEST_CASE("frame reader: a read through the read-ahead serves the pieces, keeps the rest",
          "[tcp][frame_reader]") {
    FrameReader r;
    fill_read_ahead(r, 10);
    std::uint8_t x[4] = {}, y[3] = {};
    iovec iov[2] = {{x, sizeof x}, {y, sizeof y}};
    // Not direct: all 10 bytes went to the read-ahead, the 7 asked for come out of it.
    REQUIRE(r.land_read(10, 7, read_ahead_size, false, iov, 2) == 7);
    CHECK(r.reads_with_data == 1);
    CHECK(r.drained);  // 10 < 32 KiB: the socket had no more
    CHECK(x[0] == 0);
    CHECK(x[3] == 3);
    CHECK(y[0] == 4);
    CHECK(y[2] == 6);
    REQUIRE(r.has_buffered());
    REQUIRE(r.buffered() == 3);

    // A first piece larger than what is left takes it all, and the next piece gets nothing.
    std::uint8_t big[5] = {}, after[5] = {0xee, 0xee, 0xee, 0xee, 0xee};
    iovec more[2] = {{big, sizeof big}, {after, sizeof after}};
    REQUIRE(r.take_buffered(more, 2) == 3);
    CHECK(big[0] == 7);
    CHECK(big[2] == 9);
    CHECK(after[0] == 0xee);
    CHECK_FALSE(r.has_buffered());
    CHECK(r.take_buffered(more, 2) == 0);
}

TEST_CASE("frame reader: a small first piece is filled, then the next one gets the rest",
          "[tcp][frame_reader]") {
    FrameReader r;
    fill_read_ahead(r, 6);
    iovec none{};
    REQUIRE(r.land_read(6, 0, read_ahead_size, false, &none, 0) == 0);
    std::uint8_t a[2] = {}, b[8] = {};
    iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
    REQUIRE(r.take_buffered(iov, 2) == 6);
    CHECK(a[1] == 1);
    CHECK(b[0] == 2);
    CHECK(b[3] == 5);
    CHECK(r.buffered() == 0);
}

TEST_CASE("frame reader: a direct read keeps only what came beyond the pieces",
          "[tcp][frame_reader]") {
    FrameReader r;
    std::uint8_t dst[100];
    iovec iov{dst, sizeof dst};
    // 100 into the receive and 5 of the next header into the read-ahead; 16 were allowed.
    REQUIRE(r.land_read(105, 100, 16, true, &iov, 1) == 100);
    CHECK(r.buffered() == 5);
    CHECK(r.drained);  // 105 < 116
    // The whole allowance came: the socket may hold more.
    REQUIRE(r.land_read(116, 100, 16, true, &iov, 1) == 100);
    CHECK(r.buffered() == 16);
    CHECK_FALSE(r.drained);
    // A short read fills only part of the pieces and buffers nothing.
    REQUIRE(r.land_read(40, 100, 16, true, &iov, 1) == 40);
    CHECK(r.buffered() == 0);
    CHECK(r.drained);
    CHECK(r.reads_with_data == 3);
}

TEST_CASE("frame reader: a header in two pieces is reported once whole, then decoded",
          "[tcp][frame_reader]") {
    Header h;
    h.mode = Mode::eager;
    h.tag = 42;
    h.size = 1000;
    std::uint8_t wire[max_header_size];
    const std::size_t len = encode_header(h, Framing::v2, wire);

    FrameReader r;
    std::uint8_t sink[16];
    iovec iov[iov_batch + 1];
    REQUIRE(r.next_iov(iov, header_need_v2(r.head_bytes()), sink, sizeof sink) == 1);
    REQUIRE(iov[0].iov_len == len);
    std::memcpy(iov[0].iov_base, wire, 3);
    CHECK(r.advance(3, header_need_v2) == ReadEvent::none);
    CHECK(r.owes_bytes());  // mid-header: the stall clock runs
    REQUIRE(r.next_iov(iov, header_need_v2(r.head_bytes()), sink, sizeof sink) == 1);
    REQUIRE(iov[0].iov_len == len - 3);
    std::memcpy(iov[0].iov_base, wire + 3, len - 3);
    REQUIRE(r.advance(len - 3, header_need_v2) == ReadEvent::header);
    const Header& got = r.take_header(Framing::v2);
    CHECK(got.mode == Mode::eager);
    CHECK(got.tag == 42);
    CHECK(got.size == 1000);
    CHECK(r.head_have == 0);
    CHECK(r.at_rest());
}

TEST_CASE("frame reader: a body lands in its receive's segments and is handed back whole",
          "[tcp][frame_reader]") {
    TwoSegmentRecv recv;
    FrameReader r;
    r.start_body(recv.op, 10);
    CHECK(r.owes_bytes());
    std::uint8_t sink[16];
    iovec iov[iov_batch + 1];
    REQUIRE(r.next_iov(iov, 0, sink, sizeof sink) == 2);
    CHECK(iov[0].iov_base == recv.a.data());
    CHECK(iov[1].iov_len == 6);
    CHECK(r.advance(4, header_need_v2) == ReadEvent::none);
    // The rest starts in the second segment.
    REQUIRE(r.next_iov(iov, 0, sink, sizeof sink) == 1);
    CHECK(iov[0].iov_base == recv.b.data());
    REQUIRE(r.advance(6, header_need_v2) == ReadEvent::op_body);
    CHECK(recv.op.transferred == 10);
    CHECK(r.end_body() == &recv.op);
    CHECK(r.phase == ReadPhase::header);
    CHECK(r.read_op == nullptr);
}

TEST_CASE("frame reader: a discarded payload is read through the sink, then a header follows",
          "[tcp][frame_reader]") {
    FrameReader r;
    r.start_discard(20);
    std::uint8_t sink[16];
    iovec iov[iov_batch + 1];
    REQUIRE(r.next_iov(iov, 0, sink, sizeof sink) == 1);
    CHECK(iov[0].iov_base == sink);
    CHECK(iov[0].iov_len == 16);
    CHECK(r.advance(16, header_need_v2) == ReadEvent::none);
    CHECK(r.phase == ReadPhase::discard);
    REQUIRE(r.next_iov(iov, 0, sink, sizeof sink) == 1);
    CHECK(iov[0].iov_len == 4);
    CHECK(r.advance(4, header_need_v2) == ReadEvent::none);
    CHECK(r.phase == ReadPhase::header);
}

TEST_CASE("frame reader: scratch bodies, pauses, and what closing hands back",
          "[tcp][frame_reader]") {
    FrameReader r;
    r.start_scratch(5);
    r.phase = ReadPhase::body_scratch;
    CHECK(r.advance(2, header_need_v2) == ReadEvent::none);
    CHECK(r.advance(3, header_need_v2) == ReadEvent::scratch_body);
    CHECK(r.memory() >= 5);

    std::uint8_t sink[16];
    iovec iov[iov_batch + 1];
    for (ReadPhase p : {ReadPhase::wait_unexpected, ReadPhase::wait_match, ReadPhase::wait_early}) {
        r.phase = p;
        CHECK(r.paused());
        CHECK(r.next_iov(iov, 0, sink, sizeof sink) == 0);  // nothing is read while paused
    }
    r.phase = ReadPhase::header;
    CHECK_FALSE(r.paused());
    CHECK_FALSE(r.owes_bytes());

    TwoSegmentRecv cleared, filling;
    r.incoming.emplace(7, &cleared.op);
    CHECK(r.owes_bytes());  // a transfer we cleared: its DATA is owed
    CHECK_FALSE(r.at_rest());
    r.start_body(filling.op, 10);
    std::vector<Operation*> failed;
    r.release_ops(failed);
    REQUIRE(failed == std::vector<Operation*>{&cleared.op, &filling.op});
    CHECK(r.incoming.empty());
    CHECK(r.read_op == nullptr);

    // A read_op left from a finished body is not handed back twice.
    r.phase = ReadPhase::header;
    r.read_op = &filling.op;
    failed.clear();
    r.release_ops(failed);
    CHECK(failed.empty());
}
