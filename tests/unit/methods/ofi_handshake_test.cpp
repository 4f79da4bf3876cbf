// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi hello and answer carry the sender's buffer limits (methods/ofi/ofi_handshake.hpp),
// and the key proof binds them with the stated address.
#include <catch2/catch.hpp>

#include <cstring>

#include "methods/ofi/ofi_handshake.hpp"

using namespace bmi::method::ofi;

TEST_CASE("ofi handshake: the buffer limits go and come back as sent", "[ofi][handshake]") {
    Hello hello;
    hello.name = {std::byte{1}, std::byte{2}};
    hello.stated = "ofi+tcp://127.0.0.1:3334";
    hello.limits = BufferLimits{16 * 1024, 4 * 1024};
    auto body = encode(hello);
    const auto decoded = decode_hello(body);
    REQUIRE(decoded);
    REQUIRE(decoded->limits);
    CHECK(decoded->limits->eager == 16 * 1024);
    CHECK(decoded->limits->unexpected == 4 * 1024);
    CHECK(decoded->stated == hello.stated);

    Answer answer;
    answer.stated = "ofi+shm://server";
    answer.limits = BufferLimits{65536, 8192};
    const auto again = decode_answer(encode(answer));
    REQUIRE(again);
    REQUIRE(again->limits);
    CHECK(again->limits->eager == 65536);
    CHECK(again->stated == answer.stated);

    // Without them (a libbmi before the limits): none, and the stated text is whole.
    answer.limits.reset();
    const auto older = decode_answer(encode(answer));
    REQUIRE(older);
    CHECK_FALSE(older->limits);
    CHECK(older->stated == answer.stated);
}

TEST_CASE("ofi handshake: whether the sender numbers its messages goes as sent",
          "[ofi][handshake]") {
    Hello hello;
    hello.name = {std::byte{1}};
    hello.numbers = true;
    const auto numbered = decode_hello(encode(hello));
    REQUIRE(numbered);
    CHECK(numbered->numbers);
    // A libbmi before numbers: its messages are taken as they come.
    hello.numbers = false;
    const auto older = decode_hello(encode(hello));
    REQUIRE(older);
    CHECK_FALSE(older->numbers);
    Answer answer;
    answer.numbers = true;
    const auto answered = decode_answer(encode(answer));
    REQUIRE(answered);
    CHECK(answered->numbers);
}

TEST_CASE("ofi handshake: a body that says limits but holds too few bytes is refused",
          "[ofi][handshake]") {
    Answer answer;
    answer.limits = BufferLimits{1, 2};
    auto body = encode(answer);
    body.resize(body.size() - 1);
    CHECK_FALSE(decode_answer(body));
}

TEST_CASE("ofi handshake: the proven text tells limits, numbers and stated addresses apart",
          "[ofi][handshake]") {
    const std::string stated = "ofi+tcp://10.0.0.1:3334";
    const auto with = proven_text(stated, BufferLimits{16384, 8192}, true);
    CHECK(with != proven_text(stated, BufferLimits{65536, 8192}, true));
    CHECK(with != proven_text(stated, BufferLimits{16384, 4096}, true));
    CHECK(with != proven_text(stated, std::nullopt, true));
    CHECK(with != proven_text("ofi+tcp://10.0.0.1:3335", BufferLimits{16384, 8192}, true));
    CHECK(with != proven_text(stated, BufferLimits{16384, 8192}, false));
    // shm's token (Fabric::token): another endpoint's changes the text.
    CHECK(with != proven_text(stated, BufferLimits{16384, 8192}, true, 0x1234));
    CHECK(proven_text(stated, BufferLimits{16384, 8192}, true, 0x1234) !=
          proven_text(stated, BufferLimits{16384, 8192}, true, 0x1235));
    // A stated text cannot carry limits of its own: the last ten bytes are always the limits
    // and the numbers flag.
    const auto without = proven_text(stated, std::nullopt, true);
    CHECK(proven_text(without.substr(0, without.size() - 10), std::nullopt, true) == without);
    CHECK(proven_text(with, std::nullopt, true) != with);
}

TEST_CASE("ofi handshake: a probe names its sender and a reset answers its nonce",
          "[ofi][handshake]") {
    Probe probe;
    probe.nonce.fill(7);
    probe.name.assign(16, std::byte{9});
    const auto back = decode_probe(encode(probe));
    REQUIRE(back);
    CHECK(back->nonce == probe.nonce);
    CHECK(back->name == probe.name);
    // A probe without a name, or with one longer than any endpoint's, names nobody.
    probe.name.clear();
    CHECK_FALSE(decode_probe(encode(probe)));
    probe.name.assign(max_name_bytes + 1, std::byte{9});
    CHECK_FALSE(decode_probe(encode(probe)));
    Reset reset;
    reset.nonce.fill(3);
    reset.proof.fill(4);
    auto body = encode(reset);
    const auto answered = decode_reset(body);
    REQUIRE(answered);
    CHECK(answered->nonce == reset.nonce);
    CHECK(answered->proof == reset.proof);
    body.push_back(std::byte{0});
    CHECK_FALSE(decode_reset(body));
    body.resize(body.size() - 2);
    CHECK_FALSE(decode_reset(body));
}
