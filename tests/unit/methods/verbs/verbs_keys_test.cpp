// SPDX-License-Identifier: LGPL-2.1-or-later
// Security keys on verbs (issue 16), through BMI_initialize's key_file= option: only instances
// that prove the key get past the TCP bootstrap, a refused one's messages never reach the
// application, and its own sends fail with -BMI_EACCES. Real instances on the soft-RoCE device.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../../key_files.hpp"
#include "harness.hpp"
#include "key_test_steps.hpp"
#include "methods/kit/key_exchange.hpp"
#include "support/keys/key_proof.hpp"
#include "support/keys/secret_key.hpp"
#include "verbs_raw_peer.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;
using method::verbs::Hello;
using method::verbs::MsgHeader;
using method::verbs::MsgType;
namespace keys = bmi::support::keys;

namespace {

// What a keyed HELLO of today announces.
constexpr std::uint32_t keyed_features = method::verbs::feature_key_proof |
                                         method::verbs::feature_key_binding |
                                         method::verbs::feature_key_ciphers;
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

// True if the server's application sees no unexpected message within `ms`.
bool server_sees_nothing(core::Instance& server, int ms) {
    core::UnexpectedMessage got;
    return verbs::receive_unexpected(server, got, ms) == 0;
}

MsgHeader unexpected_header(std::uint64_t size) {
    MsgHeader h;
    h.type = static_cast<std::uint8_t>(MsgType::unexpected);
    h.tag = 1;
    h.size = size;
    return h;
}
}  // namespace

TEST_CASE("verbs: a raw bootstrap peer without the key is refused before its queue pair "
          "can deliver anything",
          "[verbs][keys]") {
    KeyFiles files;
    const std::string key_path = files.key("k", 1);
    Pair pair = make_peers("verbs", key_option(key_path));
    const std::string address = pair.server.instance->listen_addresses();
    Pump pump(*pair.server.instance);
    verbs::RawPeer stranger;
    REQUIRE(stranger.usable());
    REQUIRE(stranger.dial(address));
    Hello mine = stranger.own_hello();
    const char text[] = "let me in";

    SECTION("a keyless HELLO is answered 'key required' and closed") {
        REQUIRE(stranger.send_bytes(&mine, sizeof mine));
        Hello answer;
        REQUIRE(stranger.read_hello(answer));
        CHECK((answer.features & method::verbs::feature_key_required) != 0);
        CHECK(answer.qp_num == 0);  // the server made no queue pair for it
        CHECK(stranger.closed_by_server(5000));
    }
    SECTION("a keyed HELLO followed by a wrong or reflected proof is closed") {
        mine.features = keyed_features;
        std::memset(mine.nonce, 0x5a, sizeof mine.nonce);
        REQUIRE(stranger.send_bytes(&mine, sizeof mine));
        Hello answer;
        REQUIRE(stranger.read_hello(answer));
        REQUIRE((answer.features & method::verbs::feature_key_proof) != 0);
        method::verbs::KeyProof proof;
        const bool reflect = GENERATE(false, true);
        INFO((reflect ? "the server's own proof sent back" : "a made-up proof"));
        if (reflect)
            std::memcpy(proof.proof, answer.proof, sizeof proof.proof);
        else
            std::memset(proof.proof, 0x33, sizeof proof.proof);
        // Its queue pair goes live and SENDs at once; the server's stays in INIT.
        REQUIRE(stranger.connect_qp(answer));
        REQUIRE(stranger.send_message(unexpected_header(sizeof text), text, sizeof text));
        REQUIRE(stranger.send_bytes(&proof, sizeof proof));
        CHECK(stranger.closed_by_server(5000));
    }
    SECTION("a good raw handshake works; replayed, its proof is refused") {
        keys::SharedKey key;
        REQUIRE(keys::load_key_file(key_path, key) == 0);
        const keys::Nonce nonce = keys::fresh_nonce();
        // A keyed HELLO from peer under `nonce`; the server's answer and the proof it wants.
        auto keyed_hello = [&](verbs::RawPeer& peer, Hello& mine, Hello& answer) {
            mine = peer.own_hello();
            mine.features = keyed_features;
            std::memcpy(mine.nonce, nonce.data(), sizeof mine.nonce);
            REQUIRE(peer.send_bytes(&mine, sizeof mine));
            REQUIRE(peer.read_hello(answer));
            keys::Nonce theirs{};
            std::memcpy(theirs.data(), answer.nonce, theirs.size());
            const std::string acceptor = method::verbs::endpoint_text(answer);
            const std::string initiator = method::verbs::endpoint_text(mine);
            const std::string socket =
                method::kit::acceptor_endpoint(peer.bootstrap_fd(), keys::Role::initiator);
            const keys::Transcript t{"verbs", nonce, theirs, socket, acceptor, initiator};
            REQUIRE(keys::verify(*key, keys::Role::acceptor, t, answer.proof));
            method::verbs::KeyProof proof;
            const keys::Proof right = keys::prove(*key, keys::Role::initiator, t);
            std::memcpy(proof.proof, right.data(), sizeof proof.proof);
            return proof;
        };
        Hello answer;
        const method::verbs::KeyProof proof = keyed_hello(stranger, mine, answer);
        REQUIRE(stranger.send_bytes(&proof, sizeof proof));
        REQUIRE(stranger.connect_qp(answer));
        CHECK_FALSE(stranger.closed_by_server(1000));  // the recipe is right: it is admitted

        // Nothing may follow a proof on the bootstrap socket: a proof with bytes after it (an
        // oversized one) is closed, however right its first 32 bytes.
        verbs::RawPeer longer;
        REQUIRE(longer.usable());
        REQUIRE(longer.dial(address));
        Hello longer_hello, longer_answer;
        const auto longer_proof = keyed_hello(longer, longer_hello, longer_answer);
        std::uint8_t oversized[sizeof longer_proof + 8] = {};
        std::memcpy(oversized, &longer_proof, sizeof longer_proof);
        REQUIRE(longer.send_bytes(oversized, sizeof oversized));
        CHECK(longer.closed_by_server(5000));

        // The same HELLO and proof from another socket meet a fresh server nonce.
        verbs::RawPeer replay;
        REQUIRE(replay.usable());
        REQUIRE(replay.dial(address));
        REQUIRE(replay.send_bytes(&mine, sizeof mine));
        Hello again;
        REQUIRE(replay.read_hello(again));
        CHECK(std::memcmp(again.nonce, answer.nonce, sizeof again.nonce) != 0);
        REQUIRE(replay.send_bytes(&proof, sizeof proof));
        CHECK(replay.closed_by_server(5000));
    }
    SECTION("a flood of failing handshakes leaves the keyed client working") {
        for (int i = 0; i < 20; ++i) {
            verbs::RawPeer bad;
            REQUIRE(bad.usable());
            REQUIRE(bad.dial(address));
            Hello hello = bad.own_hello();
            hello.features = keyed_features;
            REQUIRE(bad.send_bytes(&hello, sizeof hello));
            Hello answer;
            REQUIRE(bad.read_hello(answer));
            method::verbs::KeyProof guess;
            std::memset(guess.proof, i, sizeof guess.proof);
            REQUIRE(bad.send_bytes(&guess, sizeof guess));
            CHECK(bad.closed_by_server(5000));
        }
        CHECK(send_first(pair, 30000) == 0);
        core::UnexpectedMessage got;  // the keyed client's: not the strangers'
        REQUIRE(verbs::receive_unexpected(*pair.server.instance, got) == 1);
        pair.server.instance->unexpected_free(got.buffer);
    }
    SECTION("a keyed HELLO followed by half a proof times out") {
        mine.features = keyed_features;
        REQUIRE(stranger.send_bytes(&mine, sizeof mine));
        Hello answer;
        REQUIRE(stranger.read_hello(answer));
        REQUIRE(stranger.send_bytes(answer.proof, 16));
        CHECK(stranger.closed_by_server(30000));  // the handshake deadline (10 s by default)
    }
    CHECK(server_sees_nothing(*pair.server.instance, 300));
}

TEST_CASE("verbs: a keyless attacker cannot carry a handshake to a key holder and back",
          "[verbs][keys]") {
    // The keyed client dials a bootstrap endpoint the attacker holds; the attacker carries the
    // client's HELLO to the keyed server, and the server's answer back. The server's proof
    // names its own bootstrap endpoint, not the one the client dialled: the client refuses it
    // and never proves itself on the attacker's socket.
    KeyFiles files;
    Pair pair = make_peers("verbs", key_option(files.key("k", 1)));
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    std::uint16_t port = 0;
    // A plain TCP listener standing where a verbs peer should be.
    const int listener = listen_on_loopback(port);
    REQUIRE(listener >= 0);
    BMI_addr_t taken = 0;
    REQUIRE(pair.client.instance->addr_lookup("verbs://127.0.0.1:" + std::to_string(port), taken) ==
            0);
    const char secret[] = "for the real peer only";
    auto request = unexpected_request(pair.client, taken, secret, sizeof secret, 5);
    bmi_op_id_t id = 0;
    REQUIRE(pair.client.instance->post(request, id, nullptr) == 0);

    pollfd p{listener, POLLIN, 0};
    REQUIRE(poll(&p, 1, 10000) == 1);
    const int first = accept(listener, nullptr, nullptr);
    REQUIRE(first >= 0);
    Hello hello;
    REQUIRE(verbs::read_within(first, &hello, sizeof hello, 10000));
    const int second = verbs::bootstrap_socket(pair.server.instance->listen_addresses());
    REQUIRE(second >= 0);
    REQUIRE(send(second, &hello, sizeof hello, MSG_NOSIGNAL) == sizeof hello);
    Hello answer;
    REQUIRE(verbs::read_within(second, &answer, sizeof answer, 10000));
    CHECK((answer.features & method::verbs::feature_key_proof) != 0);
    REQUIRE(send(first, &answer, sizeof answer, MSG_NOSIGNAL) == sizeof answer);
    method::verbs::KeyProof leaked;
    CHECK_FALSE(verbs::read_within(first, &leaked, sizeof leaked, 3000));
    CHECK(wait_op(pair.client, id, 30000).error == -BMI_EACCES);
    for (int fd : {first, second, listener}) close(fd);
    CHECK(server_sees_nothing(*pair.server.instance, 300));
}
