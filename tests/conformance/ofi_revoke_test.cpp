// SPDX-License-Identifier: LGPL-2.1-or-later
// An ofi receive that granted its sender the right to send straight into it, then was
// cancelled, waits for the sender's answer to the revoke; a sender that never answers must not
// hold it past the rendezvous deadline, and its late answer must not disturb what follows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "harness.hpp"
#include "methods/method_config.hpp"

#if BMI_METHOD_OFI
#include "ofi_stats.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

using Clock = std::chrono::steady_clock;
constexpr bmi_size_t large = 1 << 20;  // above ofi's eager limit, within one chunk: granted
constexpr int deadline_ms = 400;       // ofi_rendezvous_timeout_ms of both instances

// One progress pass of each side, without waiting.
void drive(Side& side) {
    int outcount = 0;
    core::Completion done[1];
    REQUIRE(side.instance->testcontext(side.context, 0, outcount, done) == 0);
    REQUIRE(outcount == 0);
}

}  // namespace

TEST_CASE("ofi: a revoke its sender never answers ends the cancelled receive at the deadline",
          "[conformance][ofi][revoke]") {
    const auto schemes = compiled_schemes();
    if (std::find(schemes.begin(), schemes.end(), "ofi") == schemes.end()) return;
    Pair pair = make_peers("ofi", "ofi_rendezvous_timeout_ms=" + std::to_string(deadline_ms));
    const BMI_addr_t client = introduce(pair);

    // The server's receive is granted, and the grant has reached the client.
    std::vector<char> cancelled(large, 0);
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(
                recv_request(pair.server, client, cancelled.data(), large, 5), rid, nullptr) == 0);
    const auto grant_by = Clock::now() + std::chrono::seconds(5);
    while (ofi_stats(pair.client).grants_held == 0 && Clock::now() < grant_by) {
        drive(pair.server);
        drive(pair.client);
    }
    REQUIRE(ofi_stats(pair.client).grants_held == 1);

    // The client makes no progress from here on: the revoke stays unanswered.
    const auto cancelled_at = Clock::now();
    REQUIRE(pair.server.instance->cancel(rid, pair.server.context) == 0);
    const core::Completion got = wait_op(pair.server, rid, deadline_ms + 5000);
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cancelled_at);
    CHECK(got.error == -BMI_ECANCEL);
    INFO("the cancelled receive ended after " << waited.count() << " ms");
    CHECK(waited.count() >= deadline_ms * 3 / 4);
    CHECK(waited.count() < deadline_ms + 3000);

    // The client now reads the grant's revoke, gives the grant up and answers; the answer
    // finds nothing to end. The pair goes on with a large message of the same tag.
    const auto answer_by = Clock::now() + std::chrono::seconds(5);
    while (ofi_stats(pair.client).grants_held != 0 && Clock::now() < answer_by) {
        drive(pair.client);
        drive(pair.server);
    }
    CHECK(ofi_stats(pair.client).grants_held == 0);
    std::vector<char> out(large), in(large, 0);
    fill_pattern(out.data(), out.size(), 77);
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    bmi_op_id_t r2 = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client, in.data(), large, 5), r2,
                                       nullptr) == 0);
    const core::Completion sent = post_and_wait(
        pair.client, send_request(pair.client, pair.server_addr, out.data(), large, 5));
    CHECK(sent.error == 0);
    const core::Completion second = wait_op(pair.server, r2);
    REQUIRE(second.error == 0);
    REQUIRE(second.actual_size == large);
    CHECK(check_pattern(in.data(), in.size(), 77));
    CHECK(cancelled == std::vector<char>(large, 0));  // nothing landed in the cancelled receive
}

#endif
