// SPDX-License-Identifier: LGPL-2.1-or-later
// A listener holding many idle shm peers answers one of them promptly (issue 18): progress
// visits the connections whose doorbell bit was rung (shm_doorbell.hpp), not all of them, and
// a message whose bit the listener did not take would wait for the 250 ms sweep instead.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
constexpr int idle_peers = 200;
constexpr int round_trips = 100;

// A client instance of the pair's server that says one unexpected message and then idles.
Side idle_client(Pair& pair) {
    Side side;
    REQUIRE(core::Instance::create({}, side.instance) == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    BMI_addr_t server = 0;
    REQUIRE(side.instance->addr_lookup(pair.server.instance->listen_addresses(), server) == 0);
    static const char hello[] = "idle";
    auto request = unexpected_request(side, server, hello, sizeof hello, 0x1d1e);
    bmi_op_id_t id = 0;
    // Small: placed in the ring at once, before the handshake is even answered.
    REQUIRE(side.instance->post(request, id, nullptr) == 1);
    return side;
}
}  // namespace

TEST_CASE("shm: one of many connected peers is answered promptly while the others idle",
          "[shm][peers]") {
    Pair pair = make_peers("shm");
    std::vector<Side> idle;
    for (int i = 0; i < idle_peers; ++i) {
        // One at a time: a client that never progresses sends its hello only if its connect
        // completed at once, so the listener's backlog must not fill up.
        idle.push_back(idle_client(pair));
        // Its connection is open on the server once its message is delivered.
        auto got = wait_unexpected(pair.server);
        REQUIRE(got.tag == 0x1d1e);
        REQUIRE(pair.server.instance->unexpected_free(got.buffer) == 0);
    }
    BMI_addr_t client = introduce(pair);

    // Each round trip is two messages found by their doorbell bits. Were either found only by
    // the sweep, 100 round trips would take at least 100 x 250 ms / 2 on average.
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < round_trips; ++i) {
        char ping[8], pong[8], got_ping[8] = {}, got_pong[8] = {};
        std::memcpy(ping, &i, sizeof i);
        std::memcpy(pong, &i, sizeof i);
        pong[7] = 1;
        bmi_op_id_t server_recv = 0, client_recv = 0;
        REQUIRE(pair.server.instance->post(
                    recv_request(pair.server, client, got_ping, sizeof got_ping, 2), server_recv,
                    nullptr) == 0);
        REQUIRE(pair.client.instance->post(
                    recv_request(pair.client, pair.server_addr, got_pong, sizeof got_pong, 3),
                    client_recv, nullptr) == 0);
        post_and_wait(pair.client,
                      send_request(pair.client, pair.server_addr, ping, sizeof ping, 2));
        REQUIRE(wait_op(pair.server, server_recv, 5000).error == 0);
        REQUIRE(std::memcmp(got_ping, ping, sizeof ping) == 0);
        post_and_wait(pair.server, send_request(pair.server, client, pong, sizeof pong, 3));
        REQUIRE(wait_op(pair.client, client_recv, 5000).error == 0);
        REQUIRE(std::memcmp(got_pong, pong, sizeof pong) == 0);
    }
    auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(elapsed < std::chrono::seconds(3));
}
