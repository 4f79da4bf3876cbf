// SPDX-License-Identifier: LGPL-2.1-or-later
// The connect deadline (BMI_SHM_SETUP_TIMEOUT_MS) bounds the whole connection setup, not only
// a full backlog: a listener that queued our connect but never accepts (a stopped server) or
// accepts and never answers the hello, and on the other side a client that connects and never
// finishes its half. Each waits at most the deadline, then the connection is dropped and leaves
// no descriptor and no mapping behind. Real instances, real abstract sockets; the stopped
// server is a real shm instance nobody progresses, as a SIGSTOPped one would be.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "../../key_files.hpp"
#include "harness.hpp"
#include "hostile_peer.hpp"
#include "key_test_steps.hpp"
#include "process_census.hpp"
#include "support/keys/key_proof.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
using Clock = std::chrono::steady_clock;
constexpr const char* short_deadline = "shm_setup_timeout_ms=300";
// Above the eager limit (16 KiB): the send waits for the peer's answer, so only the deadline
// can end it. An eager send completes into the ring at once (doc/methods/shm.md).
constexpr bmi_size_t large = 64 * 1024;

// What one client leaves posted toward a peer that never answers: a large send and a receive.
struct Stranded {
    std::vector<char> out = std::vector<char>(large);
    char in[64] = {};
    bmi_op_id_t send_id = 0;
    bmi_op_id_t recv_id = 0;

    void post(Side& client, BMI_addr_t peer) {
        REQUIRE(client.instance->post(send_request(client, peer, out.data(), large, 5), send_id,
                                      nullptr) == 0);
        REQUIRE(client.instance->post(recv_request(client, peer, in, sizeof in, 6), recv_id,
                                      nullptr) == 0);
    }
    // Both fail with -BMI_ETIMEDOUT, the send by the deadline (300 ms) and well within 3 s.
    void expect_timed_out(Side& client, Clock::time_point posted) {
        core::Completion sent = wait_op(client, send_id, 5000);
        auto elapsed = Clock::now() - posted;
        core::Completion received = wait_op(client, recv_id, 1000);
        CHECK(sent.error == -BMI_ETIMEDOUT);
        CHECK(received.error == -BMI_ETIMEDOUT);
        CHECK(elapsed >= std::chrono::milliseconds(250));
        CHECK(elapsed < std::chrono::seconds(3));
    }
};

// The server closes its socket before its segment and doorbell mappings go (its pump thread
// runs on): true once this process holds what it held before, within 1 s.
bool back_to(std::size_t descriptors, std::size_t mappings) {
    auto deadline = Clock::now() + std::chrono::seconds(1);
    while (open_descriptors() != descriptors || shm_mappings() != mappings) {
        if (Clock::now() > deadline) return false;
        usleep(10'000);
    }
    return true;
}

std::string listen_name(Pair& pair) {
    std::string address = pair.server.instance->listen_addresses();
    REQUIRE(address.rfind("shm://", 0) == 0);
    return address.substr(6);
}
}  // namespace

TEST_CASE("a listener that queued the connect but never accepts fails the peer's operations "
          "with -BMI_ETIMEDOUT at the deadline, and a later post gets through") {
    Pair pair = make_peers("shm", "", short_deadline);  // nobody progresses the server yet
    const std::size_t descriptors = open_descriptors();
    const std::size_t mappings = shm_mappings();
    Stranded stranded;
    auto posted = Clock::now();
    stranded.post(pair.client, pair.server_addr);
    stranded.expect_timed_out(pair.client, posted);
    CHECK(open_descriptors() == descriptors);
    CHECK(shm_mappings() == mappings);

    // The server wakes up: it accepts the dropped connection first (and finds it gone), then
    // the new one, which carries the next message.
    Pump pump(*pair.server.instance);
    const char text[] = "after the deadline";
    auto request = unexpected_request(pair.client, pair.server_addr, text, sizeof text, 7);
    CHECK(post_and_wait(pair.client, request).error == 0);
    core::UnexpectedMessage m[1];
    int outcount = 0;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (outcount == 0 && Clock::now() < deadline)
        REQUIRE(pair.server.instance->testunexpected(1, outcount, m) == 0);
    REQUIRE(outcount == 1);
    CHECK(m[0].tag == 7);
    REQUIRE(pair.server.instance->unexpected_free(m[0].buffer) == 0);
}

TEST_CASE("a listener that accepts and never answers the hello fails the peer's operations "
          "with -BMI_ETIMEDOUT at the deadline, and leaves nothing behind") {
    Pair pair = make_peers("shm", "", short_deadline);
    const std::string name = "mute-" + std::to_string(getpid());
    int listener = listen_as(name);
    REQUIRE(listener >= 0);
    BMI_addr_t mute = 0;
    REQUIRE(pair.client.instance->addr_lookup("shm://" + name, mute) == 0);
    const std::size_t descriptors = open_descriptors();
    const std::size_t mappings = shm_mappings();

    Stranded stranded;
    auto posted = Clock::now();
    stranded.post(pair.client, mute);
    // The connect is queued by now (a Unix connect never waits): take it, read nothing.
    int accepted = accept(listener, nullptr, nullptr);
    REQUIRE(accepted >= 0);
    stranded.expect_timed_out(pair.client, posted);
    close(accepted);  // with it the hello's descriptors, never received
    CHECK(open_descriptors() == descriptors);
    CHECK(shm_mappings() == mappings);
    close(listener);
}

TEST_CASE("the server closes an accepted connection whose client never finishes its half of "
          "the handshake, at the deadline") {
    KeyFiles files;
    std::string options = short_deadline;
    SECTION("no hello") {}
    SECTION("keyed hello, no key proof") {
        // Two appends: GCC 12 -O3 warns (-Wrestrict, falsely) about "," + std::string here.
        options.append(",").append(key_option(files.key("k", 1)));
    }
    Pair pair = make_peers("shm", options);
    const std::string name = listen_name(pair);
    Pump pump(*pair.server.instance);
    const std::size_t descriptors = open_descriptors();
    const std::size_t mappings = shm_mappings();
    {
        HostilePeer idle(name);
        REQUIRE(idle.connected());
        auto connected = Clock::now();
        if (options.find("key_file") != std::string::npos) {
            const support::keys::Nonce nonce = support::keys::fresh_nonce();
            REQUIRE(idle.send_hello(16, 4096, -1, nonce.data()));
            REQUIRE(idle.await_reply(2000));  // the server waits for the proof from now on
        }
        CHECK(idle.await_close(3000));
        auto elapsed = Clock::now() - connected;
        CHECK(elapsed >= std::chrono::milliseconds(250));
        CHECK(elapsed < std::chrono::seconds(3));
    }
    // The server's side of it is gone too.
    CHECK(back_to(descriptors, mappings));
}
