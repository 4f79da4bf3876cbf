// SPDX-License-Identifier: LGPL-2.1-or-later
// Wake-ups on watched rings (shm_watched.hpp): a sender whose receiver polls the ring rings no
// doorbell, so it must still write the eventfd of a receiver that sleeps, and connections the
// receiver stops watching must ring again. A wake-up lost on either path would leave the
// message to the 250 ms sweep, which these tests would see as time.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "methods/shm/shm_watched.hpp"

using namespace bmi;
using namespace bmi::test;
using namespace std::chrono_literals;

namespace {
// One request from the client side and its answer; both sides check what they got.
void round_trip(Side& client, BMI_addr_t to_server, Side& server, BMI_addr_t to_client, int seq) {
    int got_ping = -1, got_pong = -1, pong = -seq;
    bmi_op_id_t server_recv = 0, client_recv = 0;
    REQUIRE(server.instance->post(recv_request(server, to_client, &got_ping, sizeof got_ping, 2),
                                  server_recv, nullptr) == 0);
    REQUIRE(client.instance->post(recv_request(client, to_server, &got_pong, sizeof got_pong, 3),
                                  client_recv, nullptr) == 0);
    post_and_wait(client, send_request(client, to_server, &seq, sizeof seq, 2));
    REQUIRE(wait_op(server, server_recv, 5000).error == 0);
    REQUIRE(got_ping == seq);
    post_and_wait(server, send_request(server, to_client, &pong, sizeof pong, 3));
    REQUIRE(wait_op(client, client_recv, 5000).error == 0);
    REQUIRE(got_pong == pong);
}
// Waits for op with one test call that may sleep up to 5 s: unlike wait_op's 50 ms slices,
// only a wake-up or the server's 250 ms sweep ends the sleep early.
core::Completion wait_in_one_call(Side& side, bmi_op_id_t op) {
    int outcount = 0;
    core::Completion done;
    REQUIRE(side.instance->test(op, side.context, 5000, outcount, done) == 0);
    REQUIRE(outcount == 1);
    return done;
}
// A new client instance of pair's server (with options) whose first message, an unexpected
// one carrying who, the server has taken. Returns the client's address at the server.
BMI_addr_t open_client(Pair& pair, Side& side, BMI_addr_t& to_server, int who,
                       const std::string& options) {
    core::InitParams params;
    params.options = options;
    REQUIRE(core::Instance::create(params, side.instance) == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    REQUIRE(side.instance->addr_lookup(pair.server.instance->listen_addresses(), to_server) == 0);
    auto hello = unexpected_request(side, to_server, &who, sizeof who, 1);
    bmi_op_id_t id = 0;
    REQUIRE(side.instance->post(hello, id, nullptr) == 1);  // placed in the ring at once
    auto got = wait_unexpected(pair.server, 5000);
    int said = -1;
    std::memcpy(&said, got.buffer, sizeof said);
    REQUIRE(said == who);
    REQUIRE(pair.server.instance->unexpected_free(got.buffer) == 0);
    return got.addr;
}
}  // namespace

TEST_CASE("shm: a receiver asleep on a watched ring wakes when the message comes",
          "[shm][watched]") {
    // No spin: every wait below sleeps in epoll at once.
    Pair pair = make_peers("shm", "shm_spin_us=0");
    BMI_addr_t client = introduce(pair);
    for (int i = 0; i < 10; ++i) round_trip(pair.client, pair.server_addr, pair.server, client, i);

    // Both rings carry traffic now, so both are watched. Each trial: the server sleeps on a
    // receive, the client sends 5 ms later. Found only by the sweep, each would take up to
    // 250 ms (125 ms on average); woken, 5 ms and a wake-up.
    constexpr int trials = 20;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < trials; ++i) {
        int got = -1;
        bmi_op_id_t recv = 0;
        REQUIRE(pair.server.instance->post(recv_request(pair.server, client, &got, sizeof got, 4),
                                           recv, nullptr) == 0);
        // No Catch2 assertion in the thread (Catch2 is not thread-safe): it only posts.
        int sent = -1;
        bmi_op_id_t send = 0;
        std::thread sender([&] {
            std::this_thread::sleep_for(5ms);
            sent = pair.client.instance->post(
                send_request(pair.client, pair.server_addr, &i, sizeof i, 4), send, nullptr);
        });
        const core::Completion done = wait_in_one_call(pair.server, recv);
        sender.join();
        REQUIRE(sent >= 0);
        if (sent == 0) REQUIRE(wait_op(pair.client, send).error == 0);
        REQUIRE(done.error == 0);
        REQUIRE(got == i);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    INFO("20 sleeping receives took "
         << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms");
    CHECK(elapsed < 1500ms);
}

TEST_CASE("shm: more talking clients than watched rings are all answered promptly",
          "[shm][watched]") {
    // Twelve clients; the server can watch eight, so connections replace quiet ones and the
    // replaced ring again. A message nobody looks for would wait for a sweep (up to 250 ms,
    // with no spin the server sleeps meanwhile); 340 round trips would then take far longer.
    constexpr int clients = 12;
    for (const char* spin : {"", "shm_spin_us=0"}) {
        INFO("options '" << spin << "'");
        Pair pair = make_peers("shm", spin);
        std::vector<Side> sides(clients);
        std::vector<BMI_addr_t> to_server(clients), to_client(clients);
        for (int c = 0; c < clients; ++c)
            to_client[c] = open_client(pair, sides[c], to_server[c], c, spin);
        // Eight talk (and are watched), then four others for long enough that those become
        // quiet and are replaced, then all twelve in turn.
        struct Phase {
            int first, last, rounds;
        };
        const Phase phases[] = {{0, 7, 10}, {8, 11, 40}, {0, 11, 10}};
        int trips = 0;
        const auto start = std::chrono::steady_clock::now();
        for (const Phase& phase : phases)
            for (int r = 0; r < phase.rounds; ++r)
                for (int c = phase.first; c <= phase.last; ++c)
                    round_trip(sides[c], to_server[c], pair.server, to_client[c], ++trips);
        const auto elapsed = std::chrono::steady_clock::now() - start;
        INFO(trips << " round trips took "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                   << " ms");
        CHECK(elapsed < 5s);
    }
}

TEST_CASE("shm: a message sent before the client took the server's reply is found at once",
          "[shm][watched]") {
    // The client's first message opens the connection and sits in its ring; the server reads
    // it and replies. The client does not progress before its second message, so it has not
    // read the reply, which says where the server's doorbell is. Unannounced, that message
    // would wait for the server's sweep (up to 250 ms; no spin, so the server sleeps). Eight
    // other clients keep every watched ring of the server busy, so the new connection is not
    // watched and only its ring can tell the server.
    Pair pair = make_peers("shm", "shm_spin_us=0");
    constexpr int busy_clients = method::shm::WatchedRings::capacity, trials = 10;
    std::vector<Side> busy(busy_clients);
    std::vector<BMI_addr_t> busy_to_server(busy_clients), busy_to_client(busy_clients);
    for (int b = 0; b < busy_clients; ++b)
        busy_to_client[b] = open_client(pair, busy[b], busy_to_server[b], b, "shm_spin_us=0");

    std::chrono::steady_clock::duration waited{};
    for (int c = 0; c < trials; ++c) {
        for (int b = 0; b < busy_clients; ++b)
            round_trip(busy[b], busy_to_server[b], pair.server, busy_to_client[b], c);
        Side client;
        BMI_addr_t to_server = 0;
        const BMI_addr_t from = open_client(pair, client, to_server, 100 + c, "shm_spin_us=0");
        int second = -1;
        bmi_op_id_t recv = 0, id = 0;
        REQUIRE(
            pair.server.instance->post(recv_request(pair.server, from, &second, sizeof second, 2),
                                       recv, nullptr) == 0);
        const int value = 1000 + c;
        REQUIRE(client.instance->post(send_request(client, to_server, &value, sizeof value, 2), id,
                                      nullptr) == 1);
        const auto start = std::chrono::steady_clock::now();
        REQUIRE(wait_in_one_call(pair.server, recv).error == 0);
        waited += std::chrono::steady_clock::now() - start;
        REQUIRE(second == value);
    }
    INFO("the server waited "
         << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
         << " ms in all for " << trials << " second messages");
    CHECK(waited < 600ms);
}
