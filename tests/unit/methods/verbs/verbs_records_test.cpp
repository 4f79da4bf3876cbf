// SPDX-License-Identifier: LGPL-2.1-or-later
// verbs records (issue 39): a SEND sealed on one side opens on the other only in the queue
// pair's order and unchanged; rendezvous data opens only under its own message's key, with its
// chunks in place. Pure code: runs natively, without an RDMA device.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "methods/verbs/verbs_records.hpp"
#include "methods/verbs/verbs_wire.hpp"

using namespace bmi::method::verbs;
using namespace bmi::support::keys;

namespace {

// Both sides' keys of one handshake, as the kit derives them.
struct Pair {
    TrafficKeys initiator;
    TrafficKeys acceptor;
    explicit Pair(Cipher cipher) {
        std::array<std::uint8_t, key_size> bytes;
        bytes.fill(7);
        const auto psk = SecretKey::from_bytes(bytes);
        EphemeralKey a, b;
        SharedSecret sa, sb;
        REQUIRE(a.agree(b.public_key(), sa));
        REQUIRE(b.agree(a.public_key(), sb));
        const std::vector<std::uint8_t> transcript{1, 2, 3};
        initiator = derive_traffic_keys(*psk, transcript, sa, cipher);
        acceptor = derive_traffic_keys(*psk, transcript, sb, cipher);
    }
};

Cipher some_cipher() {
    const std::uint8_t ours = ciphers_available();
    return choose_cipher(ours, ours);
}

// A SEND as verbs_send.cpp builds it: header, payload, room for the tag.
std::vector<std::uint8_t> message(std::uint64_t cookie, const std::string& text) {
    std::vector<std::uint8_t> m(buffer_size);
    MsgHeader h{};
    h.type = static_cast<std::uint8_t>(MsgType::eager);
    h.cookie = cookie;
    h.size = text.size();
    std::memcpy(m.data(), &h, sizeof h);
    std::memcpy(m.data() + sizeof h, text.data(), text.size());
    return m;
}

std::string payload(const std::vector<std::uint8_t>& m, std::uint32_t length) {
    return {m.begin() + sizeof(MsgHeader), m.begin() + length};
}

bool contains(const std::vector<std::uint8_t>& m, const std::string& text) {
    return std::search(m.begin(), m.end(), text.begin(), text.end()) != m.end();
}

}  // namespace

TEST_CASE("verbs records: messages open in order, unchanged, and hide their payload",
          "[verbs][keys]") {
    const Cipher cipher = some_cipher();
    REQUIRE(cipher != Cipher::none);
    Pair keys(cipher);
    VerbsRecords client(keys.initiator, true, default_rekey_interval);
    VerbsRecords server(keys.acceptor, false, default_rekey_interval);
    const std::string text = "a known pattern 0123456789";

    const auto original = message(1, text);
    auto m = original;
    const std::uint32_t plain = sizeof(MsgHeader) + static_cast<std::uint32_t>(text.size());
    const std::uint32_t sent = client.seal(m.data(), plain);
    REQUIRE(sent == plain + record_tag_size);
    REQUIRE_FALSE(contains(m, text));
    const auto sealed_copy = m;
    const auto opened = server.open(m.data(), sent);
    REQUIRE(opened == plain);
    REQUIRE(payload(m, *opened) == text);

    // And the other way, under the other direction's key.
    auto back = message(2, text);
    const std::uint32_t back_sent = server.seal(back.data(), plain);
    REQUIRE(client.open(back.data(), back_sent) == plain);
    REQUIRE(payload(back, plain) == text);

    SECTION("a changed header fails, and so does every later message") {
        auto next = message(3, text);
        const std::uint32_t n = client.seal(next.data(), plain);
        next[offsetof(MsgHeader, cookie)] ^= 1;
        REQUIRE_FALSE(server.open(next.data(), n));
        auto after = message(4, text);
        const std::uint32_t n2 = client.seal(after.data(), plain);
        REQUIRE_FALSE(server.open(after.data(), n2));
    }
    SECTION("a changed payload fails") {
        auto next = message(3, text);
        const std::uint32_t n = client.seal(next.data(), plain);
        next[sizeof(MsgHeader)] ^= 0x80;
        REQUIRE_FALSE(server.open(next.data(), n));
    }
    SECTION("a changed tag fails") {
        auto next = message(3, text);
        const std::uint32_t n = client.seal(next.data(), plain);
        next[plain] ^= 0x80;
        REQUIRE_FALSE(server.open(next.data(), n));
    }
    SECTION("a message out of order fails") {
        auto first = message(3, text);
        auto second = message(4, text);
        client.seal(first.data(), plain);
        const std::uint32_t n2 = client.seal(second.data(), plain);
        REQUIRE_FALSE(server.open(second.data(), n2));
    }
    SECTION("a repeated message fails") {
        auto copy = sealed_copy;
        REQUIRE_FALSE(server.open(copy.data(), sent));
    }
    SECTION("a cut message fails") {
        auto next = message(3, text);
        const std::uint32_t n = client.seal(next.data(), plain);
        REQUIRE_FALSE(server.open(next.data(), n - 1));
    }
    SECTION("shorter than a header and a tag fails") {
        REQUIRE_FALSE(server.open(m.data(), sizeof(MsgHeader) + record_tag_size - 1));
    }
}

TEST_CASE("verbs records: a tiny rekey interval steps both sides at the same message",
          "[verbs][keys]") {
    Pair keys(some_cipher());
    VerbsRecords client(keys.initiator, true, 3);
    VerbsRecords server(keys.acceptor, false, 3);
    for (int i = 0; i < 20; ++i) {
        const std::string text = "message " + std::to_string(i);
        auto m = message(static_cast<std::uint64_t>(i), text);
        const std::uint32_t plain = sizeof(MsgHeader) + static_cast<std::uint32_t>(text.size());
        const std::uint32_t n = client.seal(m.data(), plain);
        REQUIRE(server.open(m.data(), n) == plain);
        REQUIRE(payload(m, plain) == text);
    }
    REQUIRE(server.keys_used() == 1 + 7);  // our sending key unused; 20 received over 7 keys
}

TEST_CASE("verbs records: sealed rendezvous data takes a tag per 64 KiB chunk", "[verbs][keys]") {
    REQUIRE(sealed_size(0) == 0);
    REQUIRE(sealed_size(1) == 1 + 16);
    REQUIRE(sealed_size(bulk_chunk) == bulk_chunk + 16);
    REQUIRE(sealed_size(bulk_chunk + 1) == bulk_chunk + 1 + 32);
}

TEST_CASE("verbs records: rendezvous data opens only under its own message's key, in place",
          "[verbs][keys]") {
    const Cipher cipher = some_cipher();
    Pair keys(cipher);
    VerbsRecords client(keys.initiator, true, default_rekey_interval);
    VerbsRecords server(keys.acceptor, false, default_rekey_interval);

    // A list of three pieces over three chunks, with a pattern the ciphertext must not show.
    const std::uint64_t total = 2 * bulk_chunk + 1000;
    std::vector<std::uint8_t> data(total);
    for (std::uint64_t i = 0; i < total; ++i) data[i] = static_cast<std::uint8_t>(i * 7 + i / 251);
    const std::string pattern = "PATTERN-PATTERN-PATTERN";
    std::memcpy(data.data() + bulk_chunk + 5, pattern.data(), pattern.size());
    const std::vector<std::span<const std::uint8_t>> pieces{
        {data.data(), 100},
        {data.data() + 100, bulk_chunk},
        {data.data() + 100 + bulk_chunk, total - 100 - bulk_chunk}};
    std::vector<std::uint8_t> sealed(sealed_size(total));
    const std::uint64_t cookie = 41;
    seal_bulk(cipher, client.send_bulk_key(cookie), cookie, pieces, total, sealed.data());
    REQUIRE_FALSE(contains(sealed, pattern));

    SECTION("the receiver's key for the cookie opens it, each chunk in its place") {
        auto copy = sealed;
        REQUIRE(open_bulk(cipher, server.recv_bulk_key(cookie), cookie, copy.data(), total));
        for (std::uint64_t i = 0, at = 0; at < total; ++i) {
            const std::uint64_t n = std::min(bulk_chunk, total - at);
            REQUIRE(std::memcmp(copy.data() + i * (bulk_chunk + 16), data.data() + at, n) == 0);
            at += n;
        }
    }
    SECTION("another message's key, cookie or size fails") {
        auto copy = sealed;
        REQUIRE_FALSE(
            open_bulk(cipher, server.recv_bulk_key(cookie + 1), cookie, copy.data(), total));
        copy = sealed;
        REQUIRE_FALSE(
            open_bulk(cipher, server.recv_bulk_key(cookie), cookie + 1, copy.data(), total));
        copy = sealed;
        REQUIRE_FALSE(
            open_bulk(cipher, server.recv_bulk_key(cookie), cookie, copy.data(), total - 1));
        // The other direction's key for the same cookie is another key.
        copy = sealed;
        REQUIRE_FALSE(open_bulk(cipher, server.send_bulk_key(cookie), cookie, copy.data(), total));
    }
    SECTION("swapped chunks or a flipped bit fail") {
        auto copy = sealed;
        std::swap_ranges(copy.begin(), copy.begin() + bulk_chunk + 16,
                         copy.begin() + bulk_chunk + 16);
        REQUIRE_FALSE(open_bulk(cipher, server.recv_bulk_key(cookie), cookie, copy.data(), total));
        copy = sealed;
        copy[total / 2] ^= 4;
        REQUIRE_FALSE(open_bulk(cipher, server.recv_bulk_key(cookie), cookie, copy.data(), total));
    }
}

TEST_CASE("verbs records: subkeys differ by purpose and number", "[verbs][keys]") {
    Pair keys(some_cipher());
    const DirectionKey& base = keys.initiator.initiator_to_acceptor;
    const DirectionKey a = subkey(base, "p", 1);
    REQUIRE(subkey(base, "p", 1).key == a.key);
    REQUIRE(subkey(base, "p", 2).key != a.key);
    REQUIRE(subkey(base, "q", 1).key != a.key);
    REQUIRE(a.key != base.key);
}
