// SPDX-License-Identifier: LGPL-2.1-or-later
// How an ofi instance waits: alone, the control layer sleeps in the method's own epoll set
// (Method::accept_wake_fd) and hands it what woke it, on a provider with a wait descriptor
// (tcp) and on one that naps (shm) alike, also when told not to use the descriptor; and a sleep
// or a nap there still ends when a message arrives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "harness.hpp"
#include "methods/method_config.hpp"

#if BMI_METHOD_OFI
#include "ofi_stats.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

// The server sleeps (or naps) with a long idle time before a message is sent; the arrival, not
// the idle time, must end the wait.
void arrival_ends_the_wait(Pair& pair) {
    const BMI_addr_t client = introduce(pair);  // its waits sleep with a 10 ms idle time
    const std::uint64_t before = ofi_stats(pair.server).handed_wakeups;
    CHECK(before >= 1);

    char in[8] = {};
    bmi_op_id_t id = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client, in, sizeof in, 7), id,
                                       nullptr) == 0);
    // Catch2's assertions are not for a second thread: it reports through `sent`.
    std::atomic<int> sent{1};
    std::thread sender([&pair, &sent] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        char out[8];
        fill_pattern(out, sizeof out, 3);
        bmi_op_id_t send_id = 0;
        bmi_size_t actual = 0;
        const int rc = pair.client.instance->post(
            send_request(pair.client, pair.server_addr, out, sizeof out, 7), send_id, &actual);
        if (rc != 0) {
            sent = rc == 1 ? 0 : rc;
            return;
        }
        int count = 0;
        core::Completion result;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (count == 0 && std::chrono::steady_clock::now() < give_up)
            if (pair.client.instance->test(send_id, pair.client.context, 100, count, result) != 0)
                break;
        sent = count == 1 ? result.error : -BMI_ETIMEDOUT;
    });
    const auto start = std::chrono::steady_clock::now();
    int outcount = 0;
    core::Completion done;
    while (outcount == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
        REQUIRE(pair.server.instance->test(id, pair.server.context, 5000, outcount, done) == 0);
    const auto waited = std::chrono::steady_clock::now() - start;
    sender.join();
    REQUIRE(sent == 0);
    REQUIRE(outcount == 1);
    REQUIRE(done.error == 0);
    REQUIRE(check_pattern(in, sizeof in, 3));
    // Generous for a loaded machine, and still far below the 5 s idle time it must not wait out.
    CHECK(waited < std::chrono::milliseconds(2500));
    CHECK(ofi_stats(pair.server).handed_wakeups > before);
}

}  // namespace

TEST_CASE("ofi alone sleeps in its own epoll set, and an arrival ends that sleep",
          "[conformance][ofi][wait]") {
    const auto schemes = compiled_schemes();
    if (std::find(schemes.begin(), schemes.end(), "ofi") == schemes.end()) return;
    Pair pair = make_peers("ofi");
    arrival_ends_the_wait(pair);
}

TEST_CASE("ofi_wait_descriptor=0 polls and naps, and an arrival ends a nap",
          "[conformance][ofi][wait]") {
    const auto schemes = compiled_schemes();
    if (std::find(schemes.begin(), schemes.end(), "ofi") == schemes.end()) return;
    Pair pair = make_peers("ofi", "ofi_wait_descriptor=0");
    arrival_ends_the_wait(pair);
    // Naps on every provider now, also where the queue has a descriptor (tcp, verbs).
    CHECK(ofi_stats(pair.server).naps > 0);
}

#endif
