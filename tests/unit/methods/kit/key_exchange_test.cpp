// SPDX-License-Identifier: LGPL-2.1-or-later
// The kit's key exchange: the endpoint text both ends of a real socket agree on, the nonces of
// our own handshakes that an inbound hello must not carry, and the keyed handshake's states.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <set>
#include <string>

#include "methods/kit/key_exchange.hpp"
#include "methods/kit/key_handshake.hpp"

using namespace bmi::method::kit;

namespace {

// A connected pair over a real listener of `family` on loopback: {initiator, acceptor}.
struct Connected {
    int listener = -1;
    int initiator = -1;
    int acceptor = -1;
    explicit Connected(int family) {
        sockaddr_storage address{};
        socklen_t length = 0;
        if (family == AF_INET) {
            auto* in = reinterpret_cast<sockaddr_in*>(&address);
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            length = sizeof *in;
        } else {
            auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
            in6->sin6_family = AF_INET6;
            in6->sin6_addr = in6addr_loopback;
            length = sizeof *in6;
        }
        listener = socket(family, SOCK_STREAM, 0);
        REQUIRE(listener >= 0);
        if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0) return;
        REQUIRE(listen(listener, 1) == 0);
        REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        initiator = socket(family, SOCK_STREAM, 0);
        REQUIRE(connect(initiator, reinterpret_cast<sockaddr*>(&address), length) == 0);
        acceptor = accept(listener, nullptr, nullptr);
        REQUIRE(acceptor >= 0);
    }
    ~Connected() {
        for (int fd : {listener, initiator, acceptor})
            if (fd >= 0) close(fd);
    }
};

std::string listener_port(int fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return std::to_string(ntohs(in->sin_port));
}

}  // namespace

TEST_CASE("kit: both ends of a tcp connection name the acceptor's endpoint alike", "[kit]") {
    Connected ipv4(AF_INET);
    REQUIRE(ipv4.acceptor >= 0);
    const std::string seen_by_initiator = acceptor_endpoint(ipv4.initiator, Role::initiator);
    CHECK(seen_by_initiator == "127.0.0.1:" + listener_port(ipv4.listener));
    CHECK(acceptor_endpoint(ipv4.acceptor, Role::acceptor) == seen_by_initiator);
    // The initiator's own end is another endpoint: a proof made there fails here.
    CHECK(acceptor_endpoint(ipv4.initiator, Role::acceptor) != seen_by_initiator);

    Connected ipv6(AF_INET6);
    if (ipv6.acceptor < 0) return;  // no IPv6 loopback here
    const std::string v6 = acceptor_endpoint(ipv6.initiator, Role::initiator);
    CHECK(v6.rfind("[::1]:", 0) == 0);
    CHECK(acceptor_endpoint(ipv6.acceptor, Role::acceptor) == v6);
}

TEST_CASE("kit: endpoint text drops what only one side sees", "[kit]") {
    auto ipv6 = [](const char* text, std::uint16_t port, std::uint32_t scope) {
        sockaddr_in6 address{};
        address.sin6_family = AF_INET6;
        address.sin6_port = htons(port);
        address.sin6_scope_id = scope;
        REQUIRE(inet_pton(AF_INET6, text, &address.sin6_addr) == 1);
        return endpoint_text(reinterpret_cast<sockaddr*>(&address), sizeof address);
    };
    CHECK(ipv6("::ffff:10.1.2.3", 3334, 7) == "10.1.2.3:3334");
    CHECK(ipv6("fe80::1", 9, 3) == "[fe80::1]:9");

    sockaddr_un abstract{};
    abstract.sun_family = AF_UNIX;
    std::memcpy(abstract.sun_path, "\0bmi-x", 6);
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 6);
    CHECK(endpoint_text(reinterpret_cast<sockaddr*>(&abstract), length) == "@bmi-x");

    CHECK(endpoint_text(nullptr, 0).empty());
    sockaddr_in truncated{};
    truncated.sin_family = AF_INET;
    CHECK(endpoint_text(reinterpret_cast<sockaddr*>(&truncated), 4).empty());
    CHECK(acceptor_endpoint(-1, Role::initiator).empty());
}

TEST_CASE("kit: a nonce is ours exactly while its claim lives", "[kit]") {
    NoncesInFlight open;
    Nonce first{};
    {
        NoncesInFlight::Claim a = open.claim();
        first = a.nonce();
        CHECK(open.ours(first));
        NoncesInFlight::Claim b = open.claim();
        CHECK(b.nonce() != first);
        CHECK(open.size() == 2);
        // Moving a claim keeps the nonce held once; the moved-from claim releases nothing.
        NoncesInFlight::Claim moved = std::move(a);
        a.release();
        CHECK(open.ours(first));
        b.release();
        CHECK(open.size() == 1);
        b.release();           // twice is harmless
        moved = open.claim();  // assigning over a claim gives its nonce up
        CHECK_FALSE(open.ours(first));
        CHECK(open.size() == 1);
    }
    CHECK(open.size() == 0);
    Nonce stranger{};
    stranger[0] = 1;
    CHECK_FALSE(open.ours(stranger));
}

// --- the handshake state machine (methods/kit/key_handshake.hpp) ---

namespace {

using bmi::support::keys::SharedKey;

SharedKey key_of(std::uint8_t fill) {
    std::array<std::uint8_t, bmi::support::keys::key_size> bytes{};
    bytes.fill(fill);
    return bmi::support::keys::SecretKey::from_bytes(bytes);
}

struct Gates {
    KeyGate initiator{"kit-test"};
    KeyGate acceptor{"kit-test"};
    Gates(SharedKey initiator_key, SharedKey acceptor_key) {
        initiator.use(std::move(initiator_key));
        acceptor.use(std::move(acceptor_key));
    }
};

constexpr KeyFeatures keyed_hello{true, true, false};

// Runs a handshake over the real sockets of `pair`; returns the refusal that ended it.
Refusal run_handshake(Gates& gates, const Connected& pair, std::string* bound_name = nullptr) {
    KeyHandshake initiator(gates.initiator);
    KeyHandshake acceptor(gates.acceptor);
    const Nonce nonce = initiator.offer(gates.initiator, pair.initiator, "client-name");
    if (Refusal why = acceptor.check_hello(gates.acceptor, keyed_hello); why != Refusal::none)
        return why;
    const auto answer =
        acceptor.answer(gates.acceptor, pair.acceptor, nonce, "client-name", "server-name");
    if (answer.refused()) return answer.refusal;
    const auto proof = initiator.check_answer(gates.initiator, keyed_hello, answer.nonce,
                                              "server-name", answer.proof);
    if (proof.refused()) return proof.refusal;
    CHECK(initiator.proven());
    if (Refusal why = acceptor.check_proof(gates.acceptor, proof.proof); why != Refusal::none)
        return why;
    CHECK(acceptor.proven());
    if (bound_name != nullptr) *bound_name = acceptor.initiator_stated();
    return Refusal::none;
}

}  // namespace

TEST_CASE("kit handshake: the same key proves both sides, another key neither", "[kit]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    SECTION("same key") {
        Gates gates(key_of(7), key_of(7));
        std::string bound;
        CHECK(run_handshake(gates, pair, &bound) == Refusal::none);
        CHECK(bound == "client-name");
    }
    SECTION("the acceptor's key differs: the initiator refuses its proof") {
        Gates gates(key_of(7), key_of(8));
        CHECK(run_handshake(gates, pair) == Refusal::wrong_acceptor_proof);
    }
}

TEST_CASE("kit handshake: a proof made on another socket fails on this one", "[kit]") {
    // The reflection of issue 37: an attacker relays our hello to our own listener on a second
    // connection and returns the answer it got there. The acceptor's endpoint, read first-hand
    // from each socket, differs, so that answer's proof does not check.
    Connected dialled(AF_INET);
    Connected relayed(AF_INET);
    REQUIRE(dialled.acceptor >= 0);
    REQUIRE(relayed.acceptor >= 0);
    Gates gates(key_of(3), key_of(3));
    KeyHandshake ours(gates.initiator);
    const Nonce nonce = ours.offer(gates.initiator, dialled.initiator, "us");
    KeyHandshake theirs(gates.acceptor);
    const auto answer = theirs.answer(gates.acceptor, relayed.acceptor, nonce, "us", "us");
    REQUIRE_FALSE(answer.refused());
    const auto step =
        ours.check_answer(gates.initiator, keyed_hello, answer.nonce, "us", answer.proof);
    CHECK(step.refusal == Refusal::wrong_acceptor_proof);
    CHECK_FALSE(ours.proven());
}

TEST_CASE("kit handshake: our own nonce coming back is a reflection", "[kit]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    KeyGate gate("kit-test");
    gate.use(key_of(5));
    KeyHandshake outbound(gate);
    const Nonce nonce = outbound.offer(gate, pair.initiator, "us");
    KeyHandshake inbound(gate);
    CHECK(inbound.answer(gate, pair.acceptor, nonce, "us", "us").refusal ==
          Refusal::reflected_nonce);
    CHECK(tell_initiator(Refusal::reflected_nonce));
    // Once our handshake is done its nonce is nobody's secret any more, and no longer ours.
    KeyHandshake acceptor(gate);
    const auto answer = acceptor.answer(gate, pair.acceptor, Nonce{1}, "them", "us");
    REQUIRE_FALSE(answer.refused());
}

TEST_CASE("kit handshake: what an acceptor refuses before it answers", "[kit]") {
    KeyGate keyless("kit-test");
    KeyGate keyed("kit-test");
    keyed.use(key_of(1));
    const KeyHandshake idle(keyed);
    CHECK(KeyHandshake(keyless).check_hello(keyless, {}) == Refusal::none);
    CHECK(idle.check_hello(keyed, {}) == Refusal::offers_no_proof);
    CHECK(idle.check_hello(keyed, {true, false, false}) == Refusal::first_handshake);
    CHECK(idle.check_hello(keyed, keyed_hello) == Refusal::none);
    CHECK(tell_initiator(Refusal::offers_no_proof));
    CHECK(tell_initiator(Refusal::first_handshake));
    CHECK_FALSE(tell_initiator(Refusal::wrong_initiator_proof));
}

TEST_CASE("kit handshake: what an initiator refuses in an answer", "[kit]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    const std::array<std::uint8_t, 32> some_proof{9};
    SECTION("keyless: only an acceptor that requires a key refuses us") {
        KeyGate gate("kit-test");
        KeyHandshake h(gate);
        CHECK_FALSE(h.keyed());
        CHECK(h.check_answer(gate, {}, Nonce{}, "", {}).refusal == Refusal::none);
        CHECK(h.check_answer(gate, {false, false, true}, Nonce{}, "", {}).refusal ==
              Refusal::needs_our_key);
    }
    SECTION("keyed") {
        KeyGate gate("kit-test");
        gate.use(key_of(2));
        KeyHandshake h(gate);
        CHECK(h.keyed());
        CHECK(h.check_answer(gate, keyed_hello, Nonce{}, "", some_proof).refusal ==
              Refusal::wrong_acceptor_proof);  // nothing offered yet
        h.offer(gate, pair.initiator, "us");
        CHECK(h.check_answer(gate, {false, false, true}, Nonce{}, "", {}).refusal ==
              Refusal::refused_by_peer);
        CHECK(h.check_answer(gate, {}, Nonce{}, "", {}).refusal == Refusal::gives_no_proof);
        CHECK(h.check_answer(gate, keyed_hello, Nonce{}, "", {}).refusal ==
              Refusal::gives_no_proof);
        CHECK(h.check_answer(gate, {true, false, false}, Nonce{}, "", some_proof).refusal ==
              Refusal::first_handshake);
        CHECK(h.check_answer(gate, keyed_hello, Nonce{}, "", some_proof).refusal ==
              Refusal::wrong_acceptor_proof);
        CHECK_FALSE(h.proven());
    }
}

TEST_CASE("kit handshake: a proof counts once, and only after our answer", "[kit]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    Gates gates(key_of(4), key_of(4));
    KeyHandshake initiator(gates.initiator);
    KeyHandshake acceptor(gates.acceptor);
    const std::array<std::uint8_t, 32> zero_proof{};
    CHECK(acceptor.check_proof(gates.acceptor, zero_proof) == Refusal::wrong_initiator_proof);
    const Nonce nonce = initiator.offer(gates.initiator, pair.initiator, "");
    const auto answer = acceptor.answer(gates.acceptor, pair.acceptor, nonce, "", "srv");
    REQUIRE_FALSE(answer.refused());
    CHECK(acceptor.answer(gates.acceptor, pair.acceptor, nonce, "", "srv").refused());
    const auto step =
        initiator.check_answer(gates.initiator, keyed_hello, answer.nonce, "srv", answer.proof);
    REQUIRE_FALSE(step.refused());
    // The acceptor's own proof is the other role's: reflected back, it fails.
    CHECK(acceptor.check_proof(gates.acceptor, answer.proof) == Refusal::wrong_initiator_proof);
    CHECK(acceptor.check_proof(gates.acceptor, step.proof) == Refusal::none);
    CHECK(acceptor.check_proof(gates.acceptor, step.proof) == Refusal::wrong_initiator_proof);
}

TEST_CASE("kit handshake: every refusal has its own words", "[kit]") {
    std::set<std::string_view> seen;
    for (int r = static_cast<int>(Refusal::none);
         r <= static_cast<int>(Refusal::no_same_node_ticket); ++r) {
        const std::string_view text = reason(static_cast<Refusal>(r));
        CHECK_FALSE(text.empty());
        CHECK(text != "unknown refusal");
        CHECK(seen.insert(text).second);
    }
}

// --- encryption negotiated in the handshake (issue 39) ---

namespace {

using bmi::support::keys::Cipher;
using bmi::support::keys::cipher_bit;

// What a man in the middle may do to the messages of one handshake.
struct Path {
    std::uint8_t hello_ciphers_mask = 0xff;  // ANDed into the hello's offer
    bool replace_hello_key = false;          // substitutes a key of its own
    bool zero_hello_key = false;             // a low-order point
    std::uint8_t answer_choice_xor = 0;      // flips bits of the answer's choice
};

struct Ends {
    KeyHandshake initiator;
    KeyHandshake acceptor;
    Refusal refusal = Refusal::none;
};

Ends run_encrypted(Gates& gates, const Connected& pair, const Path& path = {}) {
    Ends e{KeyHandshake(gates.initiator), KeyHandshake(gates.acceptor)};
    const Nonce nonce = e.initiator.offer(gates.initiator, pair.initiator, "client-name");
    KeyFeatures hello = keyed_hello;
    hello.ciphers = e.initiator.hello_ciphers() & path.hello_ciphers_mask;
    PublicKey hello_key = e.initiator.hello_public_key();
    bmi::support::keys::EphemeralKey intruder;
    if (path.replace_hello_key) hello_key = intruder.public_key();
    if (path.zero_hello_key) hello_key = PublicKey{};
    if ((e.refusal = e.acceptor.check_hello(gates.acceptor, hello)) != Refusal::none) return e;
    const auto answer = e.acceptor.answer(gates.acceptor, pair.acceptor, nonce, "client-name",
                                          "server-name", hello, hello_key);
    if ((e.refusal = answer.refusal) != Refusal::none) return e;
    KeyFeatures answered = keyed_hello;
    answered.ciphers = answer.cipher_choice ^ path.answer_choice_xor;
    const auto proof = e.initiator.check_answer(gates.initiator, answered, answer.nonce,
                                                "server-name", answer.proof, answer.public_key);
    if ((e.refusal = proof.refusal) != Refusal::none) return e;
    e.refusal = e.acceptor.check_proof(gates.acceptor, proof.proof);
    return e;
}

// Both gates hold the same key, with these policies.
struct EncryptingGates : Gates {
    EncryptingGates(Encryption initiator_policy, Encryption acceptor_policy)
        : Gates(key_of(9), key_of(9)) {
        initiator.set_encryption(initiator_policy);
        acceptor.set_encryption(acceptor_policy);
    }
};

}  // namespace

TEST_CASE("kit handshake: encryption on both sides gives both ends the same traffic keys",
          "[kit][encryption]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    EncryptingGates gates(Encryption::prefer, Encryption::require);
    Ends e = run_encrypted(gates, pair);
    REQUIRE(e.refusal == Refusal::none);
    const Cipher expected = bmi::support::keys::cipher_available(Cipher::aes256gcm)
                                ? Cipher::aes256gcm
                                : Cipher::chacha20poly1305;
    CHECK(e.initiator.cipher() == expected);
    CHECK(e.acceptor.cipher() == expected);
    auto mine = e.initiator.take_traffic_keys();
    auto theirs = e.acceptor.take_traffic_keys();
    REQUIRE(mine);
    REQUIRE(theirs);
    CHECK(mine->initiator_to_acceptor.key == theirs->initiator_to_acceptor.key);
    CHECK(mine->acceptor_to_initiator.iv == theirs->acceptor_to_initiator.iv);
    CHECK(mine->initiator_to_acceptor.key != mine->acceptor_to_initiator.key);
    CHECK_FALSE(e.initiator.take_traffic_keys());  // handed over once

    // A second handshake between the same two, with the same key, gets other keys.
    Ends again = run_encrypted(gates, pair);
    REQUIRE(again.refusal == Refusal::none);
    CHECK(again.initiator.take_traffic_keys()->initiator_to_acceptor.key !=
          mine->initiator_to_acceptor.key);
}

TEST_CASE("kit handshake: prefer talks in clear to a peer without encryption, require refuses",
          "[kit][encryption]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    SECTION("prefer against off: plain, no keys") {
        EncryptingGates gates(Encryption::prefer, Encryption::off);
        Ends e = run_encrypted(gates, pair);
        CHECK(e.refusal == Refusal::none);
        CHECK(e.initiator.cipher() == Cipher::none);
        CHECK_FALSE(e.initiator.take_traffic_keys());
        CHECK_FALSE(e.acceptor.take_traffic_keys());
    }
    SECTION("an initiator that requires it refuses an acceptor that chose none") {
        EncryptingGates gates(Encryption::require, Encryption::off);
        CHECK(run_encrypted(gates, pair).refusal == Refusal::needs_encryption);
    }
    SECTION("an acceptor that requires it refuses a hello that offers none, and says so") {
        EncryptingGates gates(Encryption::off, Encryption::require);
        CHECK(run_encrypted(gates, pair).refusal == Refusal::needs_encryption);
        CHECK(tell_initiator(Refusal::needs_encryption));
    }
    SECTION("without a key there is nothing to encrypt with") {
        KeyGate keyless("kit-test");
        keyless.set_encryption(Encryption::require);
        CHECK(keyless.encryption() == Encryption::off);
        CHECK(keyless.cipher_offer() == 0);
    }
}

TEST_CASE("kit handshake: an offer, key or choice changed on the path fails the handshake",
          "[kit][encryption]") {
    Connected pair(AF_INET);
    REQUIRE(pair.acceptor >= 0);
    EncryptingGates gates(Encryption::prefer, Encryption::prefer);
    SECTION(
        "the offer stripped: the acceptor answers in clear, the initiator's proof check fails") {
        Path strip;
        strip.hello_ciphers_mask = 0;
        CHECK(run_encrypted(gates, pair, strip).refusal == Refusal::wrong_acceptor_proof);
    }
    SECTION("the offer narrowed to the weaker cipher") {
        Path narrow;
        narrow.hello_ciphers_mask = cipher_bit(Cipher::chacha20poly1305);
        if (gates.initiator.cipher_offer() != narrow.hello_ciphers_mask)
            CHECK(run_encrypted(gates, pair, narrow).refusal == Refusal::wrong_acceptor_proof);
    }
    SECTION("the initiator's public key replaced") {
        Path replace;
        replace.replace_hello_key = true;
        CHECK(run_encrypted(gates, pair, replace).refusal == Refusal::wrong_acceptor_proof);
    }
    SECTION("a low-order public key") {
        Path zero;
        zero.zero_hello_key = true;
        CHECK(run_encrypted(gates, pair, zero).refusal == Refusal::bad_public_key);
    }
    SECTION("the answer's choice changed to another offered cipher, or to one never offered") {
        Path flip;
        flip.answer_choice_xor = cipher_bit(Cipher::aes256gcm) |
                                 cipher_bit(Cipher::chacha20poly1305);
        const Refusal why = run_encrypted(gates, pair, flip).refusal;
        CHECK((why == Refusal::wrong_acceptor_proof || why == Refusal::bad_cipher_choice));
        Path foreign;
        foreign.answer_choice_xor = 0x80;
        CHECK(run_encrypted(gates, pair, foreign).refusal == Refusal::bad_cipher_choice);
    }
}

TEST_CASE("kit: a reset's proof holds only for its probe, both endpoints and the key",
          "[kit][keys]") {
    const auto nonce = bmi::support::keys::fresh_nonce();
    Gates gates(key_of(1), key_of(1));
    const auto proof = gates.acceptor.prove_reset(nonce, "prober", "resetter");
    CHECK(gates.initiator.verify_reset(nonce, "prober", "resetter", proof));
    CHECK_FALSE(gates.initiator.verify_reset(bmi::support::keys::fresh_nonce(), "prober",
                                             "resetter", proof));
    CHECK_FALSE(gates.initiator.verify_reset(nonce, "another", "resetter", proof));
    CHECK_FALSE(gates.initiator.verify_reset(nonce, "prober", "another", proof));
    CHECK_FALSE(gates.initiator.verify_reset(nonce, "prober", "resetter",
                                             std::span(proof).first(proof.size() - 1)));
    // Another key, or none: a stranger's reset is no proof.
    Gates other(key_of(1), key_of(2));
    CHECK_FALSE(other.initiator.verify_reset(
        nonce, "prober", "resetter", other.acceptor.prove_reset(nonce, "prober", "resetter")));
    KeyGate keyless("kit-test");
    CHECK_FALSE(gates.initiator.verify_reset(nonce, "prober", "resetter",
                                             keyless.prove_reset(nonce, "prober", "resetter")));
    // Without a key nothing is proven anywhere, this neither.
    CHECK(keyless.verify_reset(nonce, "prober", "resetter", Proof{}));
}
