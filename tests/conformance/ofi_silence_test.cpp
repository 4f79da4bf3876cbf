// SPDX-License-Identifier: LGPL-2.1-or-later
// A silent ofi peer: libfabric's providers keep no keepalive of their own, so a peer that falls
// silent while a receive of ours waits on it (its node lost, its process stopped) would hold
// that receive for ever. The method pings it half way through ofi_silent_peer_timeout_ms and
// takes it as gone at the end; a peer that polls answers, however long it has nothing to say.
// A peer we looked up stays reachable after: the next send greets it again.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "harness.hpp"
#include "methods/method_config.hpp"

#if BMI_METHOD_OFI

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;

namespace {
long long ms_since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}
}  // namespace

TEST_CASE("ofi: a peer that stops polling while a receive waits on it is gone at the bound",
          "[conformance][ofi][silence]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi", "ofi_silent_peer_timeout_ms=400");
    introduce(pair);
    // Nothing polls the server from here on: our ping reaches it and it cannot answer.
    char reply[16];
    const auto start = Clock::now();
    const core::Completion done = post_and_wait(
        pair.client, recv_request(pair.client, pair.server_addr, reply, sizeof reply, 11), 10000);
    const long long took = ms_since(start);
    CHECK(done.error == -BMI_ETIMEDOUT);
    CHECK(took >= 400);
    CHECK(took < 4000);
    // The server polls again: the address we looked up still reaches it, greeted anew.
    Pump server(*pair.server.instance);
    const std::string text = "back";
    core::PostRequest note = send_request(pair.client, pair.server_addr, text.data(),
                                          static_cast<bmi_size_t>(text.size()), 12);
    note.kind = method::OpKind::send_unexpected;
    CHECK(post_and_wait(pair.client, note).error == 0);
    const core::UnexpectedMessage message = wait_unexpected(pair.server);
    CHECK(std::string(static_cast<const char*>(message.buffer), message.size) == text);
    pair.server.instance->unexpected_free(message.buffer);
}

TEST_CASE("ofi: a peer that polls and has nothing to say keeps our receive waiting",
          "[conformance][ofi][silence]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi", "ofi_silent_peer_timeout_ms=600");
    const BMI_addr_t client = introduce(pair);
    Pump server(*pair.server.instance);
    char reply[16] = {};
    bmi_op_id_t id = 0;
    REQUIRE(pair.client.instance->post(
                recv_request(pair.client, pair.server_addr, reply, sizeof reply, 11), id,
                nullptr) == 0);
    // Three bounds of silence: each half is met by a ping the server answers as it polls.
    const auto start = Clock::now();
    while (ms_since(start) < 1800) {
        int outcount = 0;
        core::Completion early;
        REQUIRE(pair.client.instance->test(id, pair.client.context, 50, outcount, early) == 0);
        REQUIRE(outcount == 0);
    }
    const std::string text = "late";
    REQUIRE(post_and_wait(pair.server, send_request(pair.server, client, text.data(),
                                                    static_cast<bmi_size_t>(text.size()), 11))
                .error == 0);
    const core::Completion done = wait_op(pair.client, id);
    CHECK(done.error == 0);
    CHECK(std::string(reply, text.size()) == text);
}

#endif
