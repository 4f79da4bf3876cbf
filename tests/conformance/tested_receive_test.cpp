// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: the short path of a test call on one receive (OpTable::Awaited). A thread that
// tests the receive it just posted skips the first look for it, and a completion its own
// progress makes is handed to it without the context's queue. Neither may change what any
// caller sees: a completion made by another thread before or during the test still ends it at
// once, the handed op is reported exactly once, and many threads testing their own receives
// on one context each get their own. Every compiled method.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

bmi_op_id_t post_recv(Side& side, BMI_addr_t from, void* into, bmi_size_t size, bmi_msg_tag_t tag) {
    bmi_op_id_t id = 0;
    REQUIRE(side.instance->post(recv_request(side, from, into, size, tag), id, nullptr) == 0);
    return id;
}

void send_and_wait(Side& side, BMI_addr_t to, const void* data, bmi_size_t size,
                   bmi_msg_tag_t tag) {
    REQUIRE(post_and_wait(side, send_request(side, to, data, size, tag)).error == 0);
}

// Tests id in slices of slice_ms until it completes, a test fails or 30 s pass: the
// completion, or nothing. Called from several threads at once, so it may not REQUIRE.
std::optional<core::Completion> test_in_slices(core::Instance& instance, bmi_op_id_t id,
                                               bmi_context_id context, int slice_ms) {
    const auto deadline = Clock::now() + 30s;
    while (Clock::now() < deadline) {
        int outcount = 0;
        core::Completion c;
        if (instance.test(id, context, slice_ms, outcount, c) != 0) return std::nullopt;
        if (outcount == 1) return c;
    }
    return std::nullopt;
}

// post_and_wait for any thread (no REQUIRE): the completion (id 0 if the post itself finished
// the op), or nothing if the post or a test failed.
std::optional<core::Completion> post_and_test(Side& side, const core::PostRequest& request,
                                              int slice_ms) {
    bmi_op_id_t id = 0;
    const int rc = side.instance->post(request, id, nullptr);
    if (rc < 0) return std::nullopt;
    if (rc == 1) return core::Completion{};
    return test_in_slices(*side.instance, id, side.context, slice_ms);
}

// A server and a client of one method, the server knowing the client as client_addr.
struct Introduced {
    explicit Introduced(const std::string& scheme)
        : pair(make_peers(scheme)), client_addr(introduce(pair)) {}
    Pair pair;
    BMI_addr_t client_addr;
};

}  // namespace

TEST_CASE("a receive another thread's progress completed before its test ends that test at once",
          "[conformance][short-path]") {
    Introduced peers(GENERATE(from_range(compiled_schemes())));
    INFO("method " << peers.pair.scheme);
    auto& [pair, client_addr] = peers;
    char in[64] = {};
    const bmi_op_id_t id = post_recv(pair.server, client_addr, in, sizeof in, 7);
    {
        // The pump's testcontext on its own context drives the server, which completes the
        // receive into the server's context while no test call of it runs.
        Pump pump(*pair.server.instance);
        char out[64];
        fill_pattern(out, sizeof out, 3);
        send_and_wait(pair.client, pair.server_addr, out, sizeof out, 7);
        std::this_thread::sleep_for(300ms);
    }
    // The test skips its first look (this thread posted the receive); the completion moved
    // the wait point's sequence after the post, so the sleep ends at once, not after 10 s.
    const auto start = Clock::now();
    int outcount = 0;
    core::Completion c;
    REQUIRE(pair.server.instance->test(id, pair.server.context, 10000, outcount, c) == 0);
    CHECK(Clock::now() - start < 3s);
    REQUIRE(outcount == 1);
    CHECK(c.error == 0);
    CHECK(c.actual_size == sizeof in);
    CHECK(check_pattern(in, sizeof in, 3));
}

TEST_CASE("a receive its own test call completes is reported once, by that call only",
          "[conformance][short-path]") {
    Introduced peers(GENERATE(from_range(compiled_schemes())));
    INFO("method " << peers.pair.scheme);
    auto& [pair, client_addr] = peers;
    for (int round = 0; round < 20; ++round) {
        char in[32] = {}, out[32];
        fill_pattern(out, sizeof out, static_cast<std::uint32_t>(round));
        const bmi_op_id_t id = post_recv(pair.server, client_addr, in, sizeof in, 9);
        send_and_wait(pair.client, pair.server_addr, out, sizeof out, 9);
        const auto got = test_in_slices(*pair.server.instance, id, pair.server.context, 100);
        REQUIRE(got.has_value());
        CHECK(got->id == id);
        CHECK(got->error == 0);
        CHECK(check_pattern(in, sizeof in, static_cast<std::uint32_t>(round)));
        // Gone from the table and never queued: a second test of the id is refused and the
        // context holds nothing.
        int outcount = 0;
        core::Completion c;
        CHECK(pair.server.instance->test(id, pair.server.context, 0, outcount, c) == -BMI_EINVAL);
        core::Completion rest[4];
        REQUIRE(pair.server.instance->testcontext(pair.server.context, 0, outcount, rest) == 0);
        CHECK(outcount == 0);
    }
}

TEST_CASE("receives tested out of their posting order, and by another thread, each complete",
          "[conformance][short-path]") {
    Introduced peers(GENERATE(from_range(compiled_schemes())));
    INFO("method " << peers.pair.scheme);
    auto& [pair, client_addr] = peers;
    char first[16] = {}, second[16] = {}, out1[16], out2[16];
    fill_pattern(out1, sizeof out1, 1);
    fill_pattern(out2, sizeof out2, 2);
    const bmi_op_id_t id1 = post_recv(pair.server, client_addr, first, sizeof first, 11);
    const bmi_op_id_t id2 = post_recv(pair.server, client_addr, second, sizeof second, 12);
    send_and_wait(pair.client, pair.server_addr, out1, sizeof out1, 11);
    send_and_wait(pair.client, pair.server_addr, out2, sizeof out2, 12);
    // The first receive is tested first though the second was posted last; then another
    // thread tests the second, which this thread posted.
    CHECK(wait_op(pair.server, id1).error == 0);
    std::optional<core::Completion> other;
    std::thread([&] {
        other = test_in_slices(*pair.server.instance, id2, pair.server.context, 100);
    }).join();
    REQUIRE(other.has_value());
    CHECK(other->error == 0);
    CHECK(check_pattern(first, sizeof first, 1));
    CHECK(check_pattern(second, sizeof second, 2));
}

TEST_CASE("8 threads test their own receives on one context while a pump drives it",
          "[conformance][short-path][threads]") {
    Introduced peers(GENERATE(from_range(compiled_schemes())));
    INFO("method " << peers.pair.scheme);
    auto& [pair, client_addr] = peers;
    constexpr int threads = 8;
    constexpr int rounds = 40;
    std::atomic<int> failures{0}, corrupt{0};
    {
        // Completions come from the receiving thread's own progress (handed over), from the
        // pump's and from the other receivers' (queued, with a wake-up), in any mix.
        Pump server_pump(*pair.server.instance);
        Pump client_pump(*pair.client.instance);
        std::vector<std::thread> receivers;
        for (int t = 0; t < threads; ++t) {
            receivers.emplace_back([&, t] {
                const bmi_msg_tag_t tag = 100 + t;
                for (int r = 0; r < rounds; ++r) {
                    char in[48] = {};
                    bmi_op_id_t id = 0;
                    const int rc = pair.server.instance->post(
                        recv_request(pair.server, client_addr, in, sizeof in, tag), id, nullptr);
                    if (rc < 0) {
                        ++failures;
                        return;
                    }
                    // 1: the message was there already and the post took it.
                    const auto got = rc == 1 ? core::Completion{}
                                             : test_in_slices(*pair.server.instance, id,
                                                              pair.server.context, 50);
                    if (!got || got->error != 0 || got->id != id)
                        ++failures;
                    else if (!check_pattern(in, sizeof in,
                                            static_cast<std::uint32_t>(t * rounds + r)))
                        ++corrupt;
                }
            });
        }
        std::vector<std::thread> senders;
        for (int t = 0; t < threads; ++t) {
            senders.emplace_back([&, t] {
                for (int r = 0; r < rounds; ++r) {
                    char out[48];
                    fill_pattern(out, sizeof out, static_cast<std::uint32_t>(t * rounds + r));
                    const auto got = post_and_test(
                        pair.client,
                        send_request(pair.client, pair.server_addr, out, sizeof out, 100 + t), 50);
                    if (!got || got->error != 0) ++failures;
                }
            });
        }
        for (auto& s : senders) s.join();
        for (auto& r : receivers) r.join();
    }
    CHECK(failures == 0);
    CHECK(corrupt == 0);
}

TEST_CASE("a ping-pong whose test calls may each sleep 10 s never sleeps past its reply",
          "[conformance][short-path]") {
    // A handed completion moves no sequence: a method that completes the receive while it
    // prepares the sleep, and does not say so, must not put the test to sleep on it (ofi's
    // sweep of unasked data reads the completion queue and may take a reply there). Such a
    // sleep lasts until an unrelated event or the whole idle time.
    Introduced peers(GENERATE(from_range(compiled_schemes())));
    INFO("method " << peers.pair.scheme);
    auto& [pair, client_addr] = peers;
    constexpr int rounds = 5000;
    constexpr int idle_ms = 10000;
    std::atomic<int> echo_failures{0};
    // The server's side: each message back as it came, tested with the same idle time.
    const auto echoed = [&](const core::PostRequest& request) {
        const auto got = post_and_test(pair.server, request, idle_ms);
        return got && got->error == 0;
    };
    std::thread echo([&] {
        for (int r = 0; r < rounds; ++r) {
            char buffer[8] = {};
            if (!echoed(recv_request(pair.server, client_addr, buffer, sizeof buffer, 21)) ||
                !echoed(send_request(pair.server, client_addr, buffer, sizeof buffer, 22))) {
                ++echo_failures;
                return;
            }
        }
    });
    int slow_tests = 0;
    auto longest = Clock::duration::zero();
    for (int r = 0; r < rounds && echo_failures == 0; ++r) {
        char in[8] = {}, out[8];
        fill_pattern(out, sizeof out, static_cast<std::uint32_t>(r));
        const bmi_op_id_t id = post_recv(pair.client, pair.server_addr, in, sizeof in, 22);
        send_and_wait(pair.client, pair.server_addr, out, sizeof out, 21);
        const auto start = Clock::now();
        int outcount = 0;
        core::Completion c;
        REQUIRE(pair.client.instance->test(id, pair.client.context, idle_ms, outcount, c) == 0);
        const auto took = Clock::now() - start;
        longest = std::max(longest, took);
        // A reply is a round trip away (the first also connects, slowly under a sanitizer);
        // a stall is a sleep with nothing left to wake it, the whole 10 s.
        if (took > 5s) ++slow_tests;
        REQUIRE(outcount == 1);
        REQUIRE(c.error == 0);
        REQUIRE(check_pattern(in, sizeof in, static_cast<std::uint32_t>(r)));
    }
    echo.join();
    INFO("longest test call "
         << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count() << " ms");
    CHECK(echo_failures == 0);
    CHECK(slow_tests == 0);
}
