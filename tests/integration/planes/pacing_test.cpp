// SPDX-License-Identifier: LGPL-2.1-or-later
// Bandwidth from an allocation is real: a tcp allocation of 200 Mbit/s streams at 200 Mbit/s
// (±15 %, measured by the receiver), while an unpaced instance in the same process runs at
// full speed. The kernel paces each socket (SO_MAX_PACING_RATE); this shows it does.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "bmi.h"
#include "bmi/bmi.hpp"
#include "tests/integration/planes/socket_census.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
constexpr std::size_t message = 1 << 20;
constexpr int messages = 24;

std::unique_ptr<bmi::Session> session(const std::string& listen, const std::string& allocation) {
    auto r = bmi::Session::create(
        {"bmi_tcp", listen, listen.empty() ? 0 : BMI_INIT_SERVER, ""}, allocation);
    REQUIRE(r);
    return std::move(*r);
}

void wait(bmi::Session& s, bmi::Context& ctx, const bmi::Posted& posted) {
    if (posted.immediate) return;
    for (int i = 0; i < 600; ++i) {
        auto done = s.test(ctx, posted.id, 50ms);
        REQUIRE(done);
        if (*done) {
            REQUIRE_FALSE((*done)->error);
            return;
        }
    }
    FAIL("a transfer did not finish within 30 s");
}

// Streams `messages` messages from sender to receiver, in two threads; the receiver's rate
// in Mbit/s from the end of the first message to the end of the last (connection set-up and
// the first window left out).
double stream_mbps(bmi::Session& sender, bmi::Session& receiver) {
    const std::string to = receiver.listen_address();
    std::thread send([&] {
        auto ctx = sender.open_context();
        REQUIRE(ctx);
        auto peer = sender.lookup(to);
        REQUIRE(peer);
        std::vector<std::byte> data(message, std::byte{0x5a});
        // The first message is unexpected: it introduces us, as a PVFS request would.
        const std::byte hello{1};
        auto first = sender.post_send_unexpected(*ctx, *peer, {&hello, 1}, 1);
        REQUIRE(first);
        wait(sender, *ctx, *first);
        for (int i = 0; i < messages; ++i) {
            auto posted = sender.post_send(*ctx, *peer, data, 2);
            REQUIRE(posted);
            wait(sender, *ctx, *posted);
        }
    });
    auto ctx = receiver.open_context();
    REQUIRE(ctx);
    bmi::Address from;
    for (int i = 0; i < 200 && !from; ++i) {
        auto got = receiver.test_unexpected(1, 50ms);
        REQUIRE(got);
        if (!got->empty()) from = got->front().from();
    }
    REQUIRE(from);
    std::vector<std::byte> buffer(message);
    Clock::time_point first_done;
    for (int i = 0; i < messages; ++i) {
        auto posted = receiver.post_recv(*ctx, from, buffer, 2);
        REQUIRE(posted);
        wait(receiver, *ctx, *posted);
        if (i == 0) first_done = Clock::now();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - first_done).count();
    send.join();
    return (messages - 1) * message * 8.0 / seconds / 1e6;
}
}  // namespace

TEST_CASE("a 200 Mbit/s allocation streams at 200 Mbit/s; an unpaced instance does not",
          "[planes][pacing]") {
    const auto ports = bmi::test::free_ports(1);
    auto receiver = session("tcp://127.0.0.1:0", "");
    auto paced = session("", "id=bmi.slow type=tcp plane=127.0.0.0/8 endpts=1 ports=" +
                                 std::to_string(ports[0]) + " bw=200");
    auto unpaced = session("", "");
    const double slow = stream_mbps(*paced, *receiver);
    const double fast = stream_mbps(*unpaced, *receiver);
    std::printf("paced %.1f Mbit/s, unpaced %.1f Mbit/s\n", slow, fast);
    CHECK(slow >= 200 * 0.85);
    CHECK(slow <= 200 * 1.15);
    CHECK(fast > 2 * slow);
}
