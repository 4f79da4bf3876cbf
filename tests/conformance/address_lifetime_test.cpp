// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: how long a server keeps a client's address (bmi/core/address_lifetime.cpp).
// OrangeFS's rules, which pvfs2-server relies on: with BMI_AUTO_REF_COUNT each reported
// unexpected message holds a reference until BMI_DEC_ADDR_REF; an address is dropped only
// when nothing references it and its peer can never be reached again; an address we looked
// up never goes by itself. Real clients leave by destroying their instance.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;
using namespace std::chrono_literals;

namespace {

int address_count(core::Instance& instance) {
    int count = -1;
    REQUIRE(instance.get_info(0, BMI_ADDRESS_COUNT, &count) == 0);
    return count;
}

int drop_query(core::Instance& instance, BMI_addr_t addr) {
    int answer = -1;
    REQUIRE(instance.get_info(addr, BMI_DROP_ADDR_QUERY, &answer) == 0);
    return answer;
}

// Polls what (another thread keeps the instance progressing) for at most 10 s.
void wait_until(const std::function<bool()>& what, const char* for_what) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!what()) {
        if (std::chrono::steady_clock::now() > deadline) FAIL("timed out waiting: " << for_what);
        std::this_thread::sleep_for(2ms);
    }
}

// The client sends count unexpected messages; each send completes on the client.
void send_unexpected(Pair& pair, int count) {
    static const char request[] = "request";
    for (int i = 0; i < count; ++i) {
        auto send = unexpected_request(pair.client, pair.server_addr, request, sizeof request, 7);
        REQUIRE(post_and_wait(pair.client, send).error == 0);
    }
}

// Takes exactly count unexpected messages, all from one address, and frees them.
BMI_addr_t take_unexpected(Pair& pair, int count) {
    BMI_addr_t from = 0;
    int taken = 0;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (taken < count) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        core::UnexpectedMessage got[4];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(10, outcount, got) == 0);
        for (int i = 0; i < outcount; ++i) {
            REQUIRE(got[i].error == 0);
            if (from == 0) from = got[i].addr;
            REQUIRE(got[i].addr == from);
            // Shown, and not dropped before the application could look at it.
            REQUIRE(pair.server.instance->rev_lookup_unexpected(from) != nullptr);
            REQUIRE(pair.server.instance->unexpected_free(got[i].buffer) == 0);
        }
        taken += outcount;
    }
    REQUIRE(taken == count);
    return from;
}

// Sends from the server to a client that has gone fail once the server has noticed; the
// first may still be taken by the kernel, so try until one fails (at most 10 s).
void expect_send_fails(Pair& pair, BMI_addr_t to) {
    static const char answer[] = "answer";
    auto send = send_request(pair.server, to, answer, sizeof answer, 8);
    for (int attempt = 0; attempt < 1000; ++attempt) {
        bmi_op_id_t id = 0;
        int rc = pair.server.instance->post(send, id, nullptr);
        if (rc == 0) rc = wait_op(pair.server, id).error;
        if (rc < 0) {
            REQUIRE(rc != -BMI_EINVAL);  // a failure of the peer, not of the address
            return;
        }
        std::this_thread::sleep_for(10ms);
    }
    FAIL("sends to a departed client kept succeeding");
}

}  // namespace

TEST_CASE("with BMI_AUTO_REF_COUNT a client's address lives while referenced or connected",
          "[conformance][addresses]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme, "", std::nullopt, BMI_AUTO_REF_COUNT);
    core::Instance& server = *pair.server.instance;
    Pump server_pump(server);

    send_unexpected(pair, 2);
    BMI_addr_t client = take_unexpected(pair, 2);
    REQUIRE(address_count(server) == 1);

    // Two requests, two references: the first one given back leaves the second answerable
    // (the regression: the first BMI_DEC_ADDR_REF used to drop the address).
    REQUIRE(server.set_info(client, BMI_DEC_ADDR_REF, nullptr) == 0);
    char reply[16] = {};
    auto recv = recv_request(pair.client, pair.server_addr, reply, sizeof reply, 8);
    bmi_op_id_t rid = 0;
    REQUIRE(pair.client.instance->post(recv, rid, nullptr) >= 0);
    static const char answer[] = "answer";
    REQUIRE(post_and_wait(pair.server, send_request(pair.server, client, answer, sizeof answer, 8))
                .error == 0);
    if (rid != 0) REQUIRE(wait_op(pair.client, rid).error == 0);

    // The last reference given back: the client is still connected, so its address stays.
    REQUIRE(server.set_info(client, BMI_DEC_ADDR_REF, nullptr) == 0);
    REQUIRE(server.set_info(client, BMI_DEC_ADDR_REF, nullptr) == -BMI_EINVAL);  // below 0
    REQUIRE(drop_query(server, client) == 0);
    REQUIRE(address_count(server) == 1);
    REQUIRE(server.rev_lookup_unexpected(client) != nullptr);

    // The client leaves: nothing refers to the address, so the next test call drops it.
    pair.client.instance.reset();
    wait_until([&] { return address_count(server) == 0; }, "the departed client's address");
    REQUIRE(server.rev_lookup_unexpected(client) == nullptr);
    bmi_op_id_t id = 0;
    REQUIRE(server.post(send_request(pair.server, client, answer, sizeof answer, 8), id, nullptr) ==
            -BMI_EINVAL);
}

TEST_CASE("a departed client's address stays while a request still references it",
          "[conformance][addresses]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme, "", std::nullopt, BMI_AUTO_REF_COUNT);
    core::Instance& server = *pair.server.instance;
    Pump server_pump(server);

    send_unexpected(pair, 1);
    BMI_addr_t client = take_unexpected(pair, 1);
    pair.client.instance.reset();
    expect_send_fails(pair, client);
    // Gone, but referenced: the server may still log it, answer (and fail), give it back.
    for (int i = 0; i < 20; ++i) {
        int outcount = 0;
        core::UnexpectedMessage none[1];
        REQUIRE(server.testunexpected(1, outcount, none) == 0);
        REQUIRE(outcount == 0);
    }
    REQUIRE(address_count(server) == 1);
    REQUIRE(server.rev_lookup_unexpected(client) != nullptr);
    REQUIRE(drop_query(server, client) == 0);  // referenced

    // Giving the reference back drops it at once: nothing can reach the peer again.
    REQUIRE(server.set_info(client, BMI_DEC_ADDR_REF, nullptr) == 0);
    REQUIRE(server.rev_lookup_unexpected(client) == nullptr);
    REQUIRE(address_count(server) == 0);
}

TEST_CASE("without BMI_AUTO_REF_COUNT a departed client's address goes once its messages "
          "were shown",
          "[conformance][addresses]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme);
    core::Instance& server = *pair.server.instance;
    {
        Pump server_pump(server);
        // Three messages the server has not asked for yet when the client leaves.
        send_unexpected(pair, 3);
        pair.client.instance.reset();
        // Let the server's progress see the client go (loopback: well within 500 ms) ...
        wait_until([&] { return address_count(server) == 1; }, "the client's address");
        std::this_thread::sleep_for(500ms);
        REQUIRE(address_count(server) == 1);
    }
    // (From here only this thread calls the server: without a reference, the address may go
    // in any test call after its last message was shown, a pump's included.)
    // ... but the messages still wait for the application, under a valid address.
    BMI_addr_t client = take_unexpected(pair, 3);
    REQUIRE(drop_query(server, client) == 1);  // unreferenced, and the method says gone
    // Shown: the next call that looks at departed peers drops it (address_count does).
    REQUIRE(address_count(server) == 0);
    REQUIRE(server.rev_lookup_unexpected(client) == nullptr);
}

TEST_CASE("a reference taken without BMI_AUTO_REF_COUNT keeps a departed client's address",
          "[conformance][addresses]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme);
    core::Instance& server = *pair.server.instance;
    Pump server_pump(server);

    send_unexpected(pair, 1);
    BMI_addr_t client = take_unexpected(pair, 1);
    REQUIRE(server.set_info(client, BMI_INC_ADDR_REF, nullptr) == 0);
    pair.client.instance.reset();
    expect_send_fails(pair, client);
    REQUIRE(address_count(server) == 1);
    REQUIRE(server.set_info(client, BMI_DEC_ADDR_REF, nullptr) == 0);
    REQUIRE(address_count(server) == 0);
}

TEST_CASE("an address we looked up stays when its count is 0 and its server has gone",
          "[conformance][addresses]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme);
    core::Instance& client = *pair.client.instance;
    {
        Pump server_pump(*pair.server.instance);
        send_unexpected(pair, 1);
    }
    REQUIRE(client.set_info(pair.server_addr, BMI_INC_ADDR_REF, nullptr) == 0);
    REQUIRE(client.set_info(pair.server_addr, BMI_DEC_ADDR_REF, nullptr) == 0);
    pair.server.instance.reset();
    // Whatever the sends now say, the address is a name we can try again: it stays.
    static const char more[] = "more";
    auto send = unexpected_request(pair.client, pair.server_addr, more, sizeof more, 7);
    for (int i = 0; i < 3; ++i) {
        bmi_op_id_t id = 0;
        int rc = client.post(send, id, nullptr);
        if (rc == 0) (void)wait_op(pair.client, id);
    }
    REQUIRE(drop_query(client, pair.server_addr) == 0);
    REQUIRE(address_count(client) == 1);
    REQUIRE(client.rev_lookup(pair.server_addr) != nullptr);
}

// More clients over a server's life than any table of its holds at once (the address vector of
// libfabric's shm holds 256), each sending one message and leaving by destroying its instance:
// every one is served, and in the end the server keeps none of them.
TEST_CASE("a server serves more clients over its life than it holds at once",
          "[conformance][addresses][churn]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme);
    pair.client.instance.reset();
    core::Instance& server = *pair.server.instance;
    const std::string listen = server.listen_addresses();
    const int clients = churn_clients(scheme);
    Pump server_pump(server);
    for (int i = 0; i < clients; ++i) {
        INFO("client " << i);
        BMI_addr_t server_addr = 0;
        Side client = make_client("", listen, server_addr);
        const std::uint32_t sent = 0x5eed0000u + static_cast<std::uint32_t>(i);
        auto send = unexpected_request(client, server_addr, &sent, sizeof sent, 9);
        REQUIRE(post_and_wait(client, send).error == 0);
        core::UnexpectedMessage got = wait_unexpected(pair.server);
        REQUIRE(got.error == 0);
        REQUIRE(got.size == static_cast<bmi_size_t>(sizeof sent));
        std::uint32_t received = 0;
        std::memcpy(&received, got.buffer, sizeof received);
        CHECK(received == sent);
        REQUIRE(server.unexpected_free(got.buffer) == 0);
    }
    wait_until([&] { return address_count(server) == 0; }, "every client's address to go");
}
