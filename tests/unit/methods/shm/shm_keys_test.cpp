// SPDX-License-Identifier: LGPL-2.1-or-later
// Security keys on shm (issue 16), through BMI_initialize's key_file= option: only instances
// that prove the key get in, a refused one's messages never reach the application, and its own
// sends fail with -BMI_EACCES. Real instances over real abstract sockets and shared memory.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>

#include "../../key_files.hpp"
#include "harness.hpp"
#include "hostile_peer.hpp"
#include "key_test_steps.hpp"
#include "methods/kit/key_exchange.hpp"
#include "support/keys/key_proof.hpp"
#include "support/keys/secret_key.hpp"

using namespace bmi;
using namespace bmi::test;
namespace keys = bmi::support::keys;

TEST_CASE("shm: a peer without the key is refused before its messages are read", "[shm][keys]") {
    KeyFiles files;
    const std::string key = key_option(files.key("k", 1));
    Pair pair = make_peers("shm", key);
    const std::string name = pair.server.instance->listen_addresses().substr(6);
    Pump pump(*pair.server.instance);
    HostilePeer stranger(name);
    REQUIRE(stranger.connected());
    REQUIRE(stranger.send_hello(16, 4096));
    // It publishes at once, as a keyless initiator may; none of it may be delivered.
    const char text[] = "let me in";
    stranger.publish(method::shm::MsgType::unexpected, 1, sizeof text, text, sizeof text);
    CHECK_FALSE(stranger.await_reply(2000));  // refused: status -BMI_EACCES, no notifier
    CHECK(stranger.await_close(2000));
    core::UnexpectedMessage got[1];
    int outcount = 0;
    CHECK(pair.server.instance->testunexpected(1, outcount, got) == 0);
    CHECK(outcount == 0);
}

TEST_CASE("shm: recorded, reflected, malformed and flooded handshakes are refused", "[shm][keys]") {
    KeyFiles files;
    const std::string path = files.key("k", 1);
    Pair pair = make_peers("shm", key_option(path));
    keys::SharedKey key;
    REQUIRE(keys::load_key_file(path, key) == 0);
    const std::string name = pair.server.instance->listen_addresses().substr(6);
    Pump pump(*pair.server.instance);
    // The transcript the server builds for a raw initiator that listens nowhere; every raw
    // peer reaches the same listening socket.
    std::string endpoint;
    auto transcript = [&](const keys::Nonce& mine, const method::shm::HelloReply& reply) {
        keys::Transcript t;
        t.plane = "shm";
        t.initiator_nonce = mine;
        std::memcpy(t.acceptor_nonce.data(), reply.key_nonce, keys::nonce_size);
        t.acceptor_endpoint = endpoint;
        t.acceptor_address = name;
        return t;
    };
    const char text[] = "let me in";
    // Publishes after its proof; true if the server's application got it.
    auto delivered = [&](HostilePeer& peer) {
        peer.publish(method::shm::MsgType::unexpected, 1, sizeof text, text, sizeof text);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (std::chrono::steady_clock::now() < deadline) {
            core::UnexpectedMessage got[1];
            int outcount = 0;
            REQUIRE(pair.server.instance->testunexpected(20, outcount, got) == 0);
            if (outcount == 0) continue;
            pair.server.instance->unexpected_free(got[0].buffer);
            return true;
        }
        return false;
    };

    // A good raw handshake, recorded: its hello (nonce) and its proof.
    const keys::Nonce recorded_nonce = keys::fresh_nonce();
    HostilePeer good(name);
    endpoint = bmi::method::kit::acceptor_endpoint(good.socket(), keys::Role::initiator);
    REQUIRE_FALSE(endpoint.empty());
    REQUIRE(good.send_hello(16, 4096, -1, recorded_nonce.data()));
    method::shm::HelloReply reply{};
    REQUIRE(good.await_reply(2000, &reply));
    REQUIRE(keys::verify(*key, keys::Role::acceptor, transcript(recorded_nonce, reply),
                         reply.key_proof));
    const keys::Proof recorded_proof =
        keys::prove(*key, keys::Role::initiator, transcript(recorded_nonce, reply));
    REQUIRE(good.send_key_proof(recorded_proof.data()));
    CHECK(delivered(good));  // the recipe is right: a proven raw peer gets in

    SECTION("replayed from a raw socket") {
        HostilePeer replay(name);
        REQUIRE(replay.send_hello(16, 4096, -1, recorded_nonce.data()));
        REQUIRE(replay.await_reply(2000));  // a fresh acceptor nonce: the old proof is stale
        REQUIRE(replay.send_key_proof(recorded_proof.data()));
        CHECK(replay.await_close(2000));
        CHECK_FALSE(delivered(replay));
    }
    SECTION("the acceptor's own proof reflected back") {
        HostilePeer reflect(name);
        const keys::Nonce nonce = keys::fresh_nonce();
        REQUIRE(reflect.send_hello(16, 4096, -1, nonce.data()));
        method::shm::HelloReply answer{};
        REQUIRE(reflect.await_reply(2000, &answer));
        REQUIRE(reflect.send_key_proof(answer.key_proof));
        CHECK(reflect.await_close(2000));
        CHECK_FALSE(delivered(reflect));
    }
    SECTION("a truncated or oversized proof") {
        for (std::size_t size : {std::size_t{8}, sizeof(method::shm::KeyProof) - 1,
                                 sizeof(method::shm::KeyProof) + 8}) {
            INFO("proof message of " << size << " bytes");
            HostilePeer bad(name);
            const keys::Nonce nonce = keys::fresh_nonce();
            REQUIRE(bad.send_hello(16, 4096, -1, nonce.data()));
            method::shm::HelloReply answer{};
            REQUIRE(bad.await_reply(2000, &answer));
            const keys::Proof right =
                keys::prove(*key, keys::Role::initiator, transcript(nonce, answer));
            REQUIRE(bad.send_key_proof(right.data(), size));
            CHECK(bad.await_close(2000));
            CHECK_FALSE(delivered(bad));
        }
    }
    SECTION("a flood of failing handshakes leaves the keyed client working") {
        for (int i = 0; i < 50; ++i) {
            HostilePeer bad(name);
            const keys::Nonce nonce = keys::fresh_nonce();
            REQUIRE(bad.send_hello(16, 4096, -1, nonce.data()));
            REQUIRE(bad.await_reply(2000));
            keys::Proof guess{};
            guess[0] = static_cast<std::uint8_t>(i);
            REQUIRE(bad.send_key_proof(guess.data()));
            CHECK(bad.await_close(2000));
        }
        CHECK(delivered(good));  // the proven raw peer is still served
    }
    // Meanwhile the keyed libbmi client keeps working.
    CHECK(send_first(pair, 5000) == 0);
}

TEST_CASE("shm: with no key a keyless peer is served as before", "[shm][keys]") {
    Pair pair = make_peers("shm");
    CHECK(send_first(pair, 5000) == 0);
    const std::string name = pair.server.instance->listen_addresses().substr(6);
    Pump pump(*pair.server.instance);
    HostilePeer plain(name);
    REQUIRE(plain.send_hello(16, 4096));
    CHECK(plain.await_reply(2000));
}

TEST_CASE("shm: a bad key file stops BMI_initialize", "[shm][keys]") {
    KeyFiles files;
    core::InitParams params;
    params.listen = test_listen_address("shm");
    params.flags = BMI_INIT_SERVER;
    std::unique_ptr<core::Instance> instance;
    params.options = key_option(files.write("world", std::vector<std::uint8_t>(32, 1), 0644));
    CHECK(core::Instance::create(params, instance) == -BMI_EACCES);
    params.options = key_option(files.write("short", std::vector<std::uint8_t>(8, 1)));
    CHECK(core::Instance::create(params, instance) == -BMI_EINVAL);
    params.options = key_option(files.dir() + "/missing");
    CHECK(core::Instance::create(params, instance) == -BMI_ENOENT);
}
