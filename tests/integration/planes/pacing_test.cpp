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
    auto r = bmi::Session::create({"bmi_tcp", listen, listen.empty() ? 0 : BMI_INIT_SERVER, ""},
                                  allocation);
    REQUIRE(r);
    return std::move(*r);
}

// The error of a transfer (empty once it completed well); no Catch2 assertion, so that the
// sender's thread may call it (Catch2's assertions are for the test's own thread).
std::error_code wait(bmi::Session& s, bmi::Context& ctx, const bmi::Result<bmi::Posted>& posted) {
    if (!posted) return posted.error();
    if (posted->immediate) return {};
    for (int i = 0; i < 600; ++i) {
        auto done = s.test(ctx, posted->id, 50ms);
        if (!done) return done.error();
        if (*done) return (*done)->error;
    }
    return bmi::errc::timed_out;
}

// Streams `messages` messages from sender to receiver, in two threads; the receiver's rate
// in Mbit/s from the end of the first message to the end of the last (connection set-up and
// the first window left out).
double stream_mbps(bmi::Session& sender, bmi::Session& receiver) {
    const std::string to = receiver.listen_address();
    std::error_code sender_error;  // the sender thread's verdict, checked after join
    std::thread send([&] {
        auto ctx = sender.open_context();
        auto peer = ctx ? sender.lookup(to) : bmi::Result<bmi::Address>(ctx.error());
        if (!peer) {
            sender_error = peer.error();
            return;
        }
        std::vector<std::byte> data(message, std::byte{0x5a});
        // The first message is unexpected: it introduces us, as a PVFS request would.
        const std::byte hello{1};
        sender_error = wait(sender, *ctx, sender.post_send_unexpected(*ctx, *peer, {&hello, 1}, 1));
        for (int i = 0; i < messages && !sender_error; ++i)
            sender_error = wait(sender, *ctx, sender.post_send(*ctx, *peer, data, 2));
    });
    struct Joiner {  // a failed REQUIRE below still joins the sender before unwinding
        std::thread& thread;
        ~Joiner() {
            if (thread.joinable()) thread.join();
        }
    } joiner{send};
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
    std::error_code receiver_error;
    for (int i = 0; i < messages && !receiver_error; ++i) {
        receiver_error = wait(receiver, *ctx, receiver.post_recv(*ctx, from, buffer, 2));
        if (i == 0) first_done = Clock::now();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - first_done).count();
    send.join();
    INFO("sender: " << sender_error.message() << "; receiver: " << receiver_error.message());
    REQUIRE_FALSE(sender_error);
    REQUIRE_FALSE(receiver_error);
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
