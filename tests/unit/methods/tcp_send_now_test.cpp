// SPDX-License-Identifier: LGPL-2.1-or-later
// Method::send_now on tcp: a small send to an idle connection leaves in one sendmsg with no
// operation; one that fits only in part keeps its rest and writes it ahead of later sends,
// and the operation the control layer then posts for it completes once the rest is written.
#include <catch2/catch.hpp>

#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp::test;

namespace {
constexpr int max_messages = 20000;
constexpr int queued_after = 20;

std::vector<std::uint8_t> message(int i, bmi_size_t size) {
    return pattern(static_cast<std::size_t>(size), static_cast<std::uint32_t>(i + 1));
}
}  // namespace

TEST_CASE("tcp send_now: immediate sends keep their order and bytes when the socket fills",
          "[tcp]") {
    // Odd sizes, so that a filling socket cuts one of them in the middle rather than between
    // two: one sent from a single coalesced buffer, one as header and payload pieces.
    const bmi_size_t message_size =
        GENERATE(bmi_size_t(4001), bmi_size_t(16001), bmi_size_t(60001));
    const auto message = [&](int i) { return ::message(i, message_size); };
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());

    // The server reads nothing yet: send_now until the socket refuses or takes only part.
    std::vector<std::vector<std::uint8_t>> sent;
    std::vector<std::unique_ptr<Operation>> sends;
    int immediate = 0;
    for (int i = 0; i < max_messages; ++i) {
        sent.push_back(message(i));
        const Segment whole{sent.back().data(), message_size};
        const int rc = p.client->send_now(*p.to_server, OpKind::send, 3, {&whole, 1});
        REQUIRE(rc >= 0);
        if (rc == 0) {
            sent.pop_back();
            break;
        }
        if (rc == Method::send_now_started) {
            // Posted next, as the control layer does: it stays pending until the rest leaves.
            sends.push_back(
                make_op(OpKind::send, p.to_server, 3, sent.back().data(), message_size));
            REQUIRE(post(*p.client, *sends.back()) == 0);
            break;
        }
        REQUIRE(rc == 1);
        ++immediate;
        p.client->progress();  // a new pass: send_now writes directly once per pass
    }
    INFO("immediate sends before the socket filled: " << immediate);
    REQUIRE(immediate > 1);
    REQUIRE(immediate < max_messages);  // the socket did fill

    // Later sends queue behind whatever send_now left unwritten.
    for (int i = 0; i < queued_after; ++i) {
        sent.push_back(message(static_cast<int>(sent.size())));
        const Segment whole{sent.back().data(), message_size};
        CHECK(p.client->send_now(*p.to_server, OpKind::send, 3, {&whole, 1}) == 0);
        sends.push_back(make_op(OpKind::send, p.to_server, 3, sent.back().data(), message_size));
        REQUIRE(post(*p.client, *sends.back()) >= 0);
    }

    std::vector<std::vector<std::uint8_t>> in(sent.size(), std::vector<std::uint8_t>(message_size));
    std::vector<std::unique_ptr<Operation>> recvs;
    for (auto& buffer : in) {
        recvs.push_back(make_op(OpKind::recv, p.to_client, 3, buffer.data(), message_size));
        REQUIRE(post(*p.server, *recvs.back()) >= 0);
    }
    REQUIRE(p.run(
        [&] {
            for (auto& r : recvs)
                if (!r->completed) return false;
            for (auto& s : sends)
                if (!s->completed) return false;
            return true;
        },
        20));
    for (auto& s : sends) CHECK(s->error == 0);
    int intact = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        CHECK(recvs[i]->error == 0);
        CHECK(recvs[i]->actual_size == message_size);
        if (in[i] == sent[i]) ++intact;
    }
    CHECK(intact == static_cast<int>(in.size()));
}

TEST_CASE("tcp send_now declines what it cannot send at once", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    std::vector<std::uint8_t> data(64, 7);
    const Segment whole{data.data(), 64};
    // No connection yet: the usual path connects first.
    CHECK(p.client->send_now(*p.to_server, OpKind::send, 1, {&whole, 1}) == 0);
    REQUIRE(p.connect());
    p.client->progress();
    CHECK(p.client->send_now(*p.to_server, OpKind::send, 1, {&whole, 1}) == 1);
    // A second one in the same pass waits for the pass, so a burst leaves in one sendmsg.
    CHECK(p.client->send_now(*p.to_server, OpKind::send, 1, {&whole, 1}) == 0);
    p.client->progress();
    // Over the unexpected limit is refused as post() would refuse it.
    std::vector<std::uint8_t> big(static_cast<std::size_t>(p.client->unexpected_limit()) + 1);
    const Segment too_big{big.data(), static_cast<bmi_size_t>(big.size())};
    CHECK(p.client->send_now(*p.to_server, OpKind::send_unexpected, 1, {&too_big, 1}) ==
          -BMI_EMSGSIZE);
    // Large messages take the usual, copy-free path.
    std::vector<std::uint8_t> large(1 << 17);
    const Segment whole_large{large.data(), static_cast<bmi_size_t>(large.size())};
    CHECK(p.client->send_now(*p.to_server, OpKind::send, 1, {&whole_large, 1}) == 0);
}

TEST_CASE("tcp send_now on legacy framing sends only what OrangeFS takes as EAGER", "[tcp]") {
    Pair p("tcp://127.0.0.1:0", 0, "tcp_legacy=1", "tcp_legacy=1");
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    p.client->progress();
    // Over 16 KiB a legacy peer expects a REND frame, which only the usual path builds.
    std::vector<std::uint8_t> over(16 * 1024 + 1, 3);
    const Segment whole_over{over.data(), static_cast<bmi_size_t>(over.size())};
    CHECK(p.client->send_now(*p.to_server, OpKind::send, 2, {&whole_over, 1}) == 0);
    auto data = pattern(16 * 1024, 5);
    const Segment whole{data.data(), static_cast<bmi_size_t>(data.size())};
    REQUIRE(p.client->send_now(*p.to_server, OpKind::send, 2, {&whole, 1}) == 1);
    std::vector<std::uint8_t> in(data.size());
    auto r = make_op(OpKind::recv, p.to_client, 2, in.data(), static_cast<bmi_size_t>(in.size()));
    REQUIRE(post(*p.server, *r) >= 0);
    REQUIRE(p.run([&] { return r->completed; }));
    CHECK(r->error == 0);
    CHECK(in == data);
}
