// SPDX-License-Identifier: LGPL-2.1-or-later
// Small sends posted in a burst (no progress call between them) leave coalesced, several frames
// to a sendmsg: the first goes at once, the rest wait for the next progress call. These tests check
// what coalescing must never change: order, payloads, list I/O with more segments than one
// sendmsg takes, rendezvous frames in the middle of a burst, and cancel of a queued send.
#include <catch2/catch.hpp>

#include <cstring>

#include "methods/tcp/tcp_frame_writer.hpp"
#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp::test;

namespace {

// Sizes that mix eager frames, a frame over the 64 KiB batch bound and rendezvous (RTS) frames.
bmi_size_t burst_size(int i) {
    static const bmi_size_t sizes[] = {1, 8, 100, 4000, 16384, 65536, 70000, 300, 0, 200000};
    return sizes[i % 10];
}

struct Burst {
    std::vector<std::vector<std::uint8_t>> out, in;
    std::vector<std::unique_ptr<Operation>> sends, recvs;
};

void check_all_arrived(Pair& p, Burst& b, const std::vector<bool>& cancelled) {
    for (std::size_t i = 0; i < b.sends.size(); ++i) {
        if (cancelled[i]) continue;
        b.in.emplace_back(b.out[i].size() + 1);
        b.recvs.push_back(make_op(OpKind::recv, p.to_client, 5, b.in.back().data(),
                                  bmi_size_t(b.in.back().size())));
        post(*p.server, *b.recvs.back());
    }
    REQUIRE(p.run(
        [&] {
            for (auto& op : b.recvs)
                if (!op->completed) return false;
            for (auto& op : b.sends)
                if (!op->completed) return false;
            return true;
        },
        20.0));
    std::size_t k = 0;
    for (std::size_t i = 0; i < b.sends.size(); ++i) {
        if (cancelled[i]) {
            CHECK(b.sends[i]->error == -BMI_ECANCEL);
            continue;
        }
        CHECK(b.sends[i]->error == 0);
        Operation& r = *b.recvs[k];
        INFO("message " << i << " of " << b.out[i].size() << " bytes, receive " << k);
        CHECK(r.error == 0);
        REQUIRE(r.actual_size == bmi_size_t(b.out[i].size()));
        CHECK(std::memcmp(b.in[k].data(), b.out[i].data(), b.out[i].size()) == 0);
        ++k;
    }
}

}  // namespace

TEST_CASE("tcp a burst of sends arrives whole and in order", "[tcp][burst]") {
    const std::string options = GENERATE(std::string(""), std::string("tcp_legacy=1"));
    INFO("client options: '" << options << "'");
    Pair p("tcp://127.0.0.1:0", 0, "", options);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    Burst b;
    const int count = 300;
    std::vector<bool> cancelled(count, false);
    for (int i = 0; i < count; ++i) {
        b.out.push_back(pattern(std::size_t(burst_size(i)), 100 + i));
        b.sends.push_back(make_op(OpKind::send, p.to_server, 5, b.out.back().data(),
                                  bmi_size_t(b.out.back().size())));
        const int rc = post(*p.client, *b.sends.back());
        REQUIRE(rc >= 0);
        // Only the first send of the burst is written inside post(); the rest wait for the
        // next progress call, so that they leave together.
        if (i > 0) CHECK(rc == 0);
    }
    // Queued, nothing written: cancelling them must leave the stream intact.
    for (int i : {37, 38, 150}) {
        p.client->cancel(*b.sends[i]);
        CHECK(b.sends[i]->completed);
        cancelled[i] = true;
    }
    check_all_arrived(p, b, cancelled);
}

TEST_CASE("tcp a burst with a list send of many segments stays in step", "[tcp][burst]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    Burst b;
    // 200 segments: more than one sendmsg carries for one frame (iov_batch is 64), so the
    // frames behind it must not be gathered into the same call.
    auto listed = pattern(200 * 7, 9);
    std::vector<Segment> segments;
    for (int i = 0; i < 200; ++i) segments.push_back({listed.data() + i * 7, 7});
    for (int i = 0; i < 9; ++i) {
        if (i == 4) {
            b.out.push_back(listed);
            b.sends.push_back(make_list_op(OpKind::send, p.to_server, 5, segments));
        } else {
            b.out.push_back(pattern(std::size_t(50 + i), 300 + i));
            b.sends.push_back(make_op(OpKind::send, p.to_server, 5, b.out.back().data(),
                                      bmi_size_t(b.out.back().size())));
        }
        REQUIRE(post(*p.client, *b.sends.back()) >= 0);
    }
    check_all_arrived(p, b, std::vector<bool>(b.sends.size(), false));
}

TEST_CASE("tcp sends separated by progress calls are written inside post", "[tcp][burst]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    auto data = pattern(64, 1);
    for (int i = 0; i < 5; ++i) {
        auto s = make_op(OpKind::send, p.to_server, 6, data.data(), 64);
        // A request/response client posts one send per progress call: it must not wait.
        CHECK(post(*p.client, *s) == 1);
        p.client->progress();
    }
}

TEST_CASE("tcp a large send after a direct write in the same pass is written inside post",
          "[tcp][burst]") {
    // A server's I/O thread posts its replies while another thread sleeps in the wait point:
    // a large one queued for the next progress call would cost that thread a wake-up.
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    auto small = pattern(8, 2);
    auto large = pattern(std::size_t(tcp::burst_message_limit) + 1000, 3);
    auto first = make_op(OpKind::send, p.to_server, 7, small.data(), 8);
    CHECK(post(*p.client, *first) == 1);
    auto second = make_op(OpKind::send, p.to_server, 7, large.data(), bmi_size_t(large.size()));
    CHECK(post(*p.client, *second) == 1);
    std::vector<std::uint8_t> in(large.size()), small_in(8);
    auto r1 = make_op(OpKind::recv, p.to_client, 7, small_in.data(), 8);
    auto r2 = make_op(OpKind::recv, p.to_client, 7, in.data(), bmi_size_t(in.size()));
    post(*p.server, *r1);
    post(*p.server, *r2);
    REQUIRE(p.run([&] { return r1->completed && r2->completed; }, 20.0));
    CHECK(r2->error == 0);
    CHECK(std::memcmp(in.data(), large.data(), large.size()) == 0);
}
