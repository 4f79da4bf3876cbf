// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: an instance that waits for traffic holds no core (a server with no clients must
// not poll without end, whether or not its method has a descriptor to sleep on), and a
// message to a server that has waited for a while still arrives at once, not at the end of the
// caller's idle time.
#include <catch2/catch.hpp>

#include <chrono>

#include "harness.hpp"
#include "process_cpu.hpp"

using namespace bmi;
using namespace bmi::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int idle_share_bound = 2;
#else
constexpr int idle_share_bound = 5;
#endif

std::chrono::microseconds process_cpu() {
    return std::chrono::microseconds(static_cast<long long>(process_cpu_seconds() * 1e6));
}
}  // namespace

TEST_CASE("a server waiting with no traffic uses little CPU", "[conformance][idle]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    Pair pair = make_peers(scheme);
    const auto cpu_before = process_cpu();
    const auto start = Clock::now();
    while (Clock::now() - start < 500ms) {
        int outcount = 0;
        core::Completion c[4];
        REQUIRE(pair.server.instance->testcontext(pair.server.context, 100, outcount, c) == 0);
    }
    const auto wall = Clock::now() - start;
    const auto cpu = process_cpu() - cpu_before;
    INFO(scheme << ": " << std::chrono::duration_cast<std::chrono::microseconds>(cpu).count()
                << " us of CPU in "
                << std::chrono::duration_cast<std::chrono::microseconds>(wall).count() << " us");
    // Polling without end costs all of it; the policies cost a few percent at most. A nap's
    // wake-up runs instrumented code under a sanitizer, and on a loaded machine it starts with
    // cold caches each time: there it may cost several times as much, still far from all.
    CHECK(cpu < wall / idle_share_bound);
}

TEST_CASE("a message to a server that waited a while arrives before its idle time ends",
          "[conformance][idle]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    Pair pair = make_peers(scheme);
    BMI_addr_t client_addr = introduce(pair);
    char in[8] = {}, out[8] = "late";
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in, sizeof in, 9),
                                       rid, nullptr) == 0);
    // Long enough for a polling method to reach its longest nap.
    for (int i = 0; i < 3; ++i) {
        int outcount = 0;
        core::Completion c;
        REQUIRE(pair.server.instance->test(rid, pair.server.context, 100, outcount, c) == 0);
        REQUIRE(outcount == 0);
    }
    bmi_op_id_t sid = 0;
    const int rc = pair.client.instance->post(
        send_request(pair.client, pair.server_addr, out, sizeof out, 9), sid, nullptr);
    REQUIRE(rc >= 0);
    const auto start = Clock::now();
    int outcount = 0;
    core::Completion got;
    REQUIRE(pair.server.instance->test(rid, pair.server.context, 5000, outcount, got) == 0);
    const auto waited = Clock::now() - start;
    if (rc == 0) REQUIRE(wait_op(pair.client, sid).error == 0);
    REQUIRE(outcount == 1);
    CHECK(got.error == 0);
    CHECK(waited < 1s);
}
