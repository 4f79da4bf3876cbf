// SPDX-License-Identifier: LGPL-2.1-or-later
// Pure tests of the tcp wire format and address helpers: no sockets.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "methods/tcp/tcp_address.hpp"
#include "methods/tcp/tcp_wire.hpp"

using namespace bmi::method::tcp;

TEST_CASE("legacy header layout is the OrangeFS one", "[tcp][wire]") {
    Header h;
    h.mode = Mode::eager;
    h.tag = wire_tag(-2);
    h.size = 0x0102030405ull;
    std::uint8_t buf[max_header_size] = {};
    REQUIRE(encode_header(h, Framing::orangefs, buf) == 24);
    // magic 51903 = 0xCABF, little-endian
    CHECK(buf[0] == 0xBF);
    CHECK(buf[1] == 0xCA);
    CHECK(buf[4] == 4);
    for (int i = 8; i < 16; ++i) CHECK(buf[i] == (i == 8 ? 0xFE : 0xFF));  // sign-extended -2
    CHECK(buf[16] == 0x05);
    CHECK(buf[20] == 0x01);
    Header back = decode_header(buf, Framing::orangefs);
    CHECK(back.magic == wire_magic);
    CHECK(back.mode == Mode::eager);
    CHECK(tag_of(back) == -2);
    CHECK(back.size == h.size);
}

TEST_CASE("v2 header round trip carries the cookie", "[tcp][wire]") {
    Header h;
    h.mode = Mode::rts;
    h.tag = wire_tag(77);
    h.size = 40ull << 20;
    h.cookie = 0xdeadbeefcafef00dull;
    std::uint8_t buf[max_header_size];
    REQUIRE(encode_header(h, Framing::v2, buf) == 32);
    Header back = decode_header(buf, Framing::v2);
    CHECK(back.cookie == h.cookie);
    CHECK(back.size == h.size);
    CHECK(tag_of(back) == 77);
    CHECK(check_header(back, Dialect::v2, default_unexpected_limit) == 0);
}

TEST_CASE("check_header rejects what must not be trusted", "[tcp][wire]") {
    auto check = [](Mode m, std::uint64_t size, Dialect d, std::uint32_t magic = wire_magic) {
        Header h;
        h.magic = magic;
        h.mode = m;
        h.size = size;
        return check_header(h, d, 4096);
    };
    CHECK(check(Mode::eager, 10, Dialect::legacy, 12345) == -BMI_EPROTO);
    CHECK(check(static_cast<Mode>(0x3), 10, Dialect::legacy) == -BMI_EPROTO);
    CHECK(check(Mode::unexpected, 4096, Dialect::legacy) == 0);
    CHECK(check(Mode::unexpected, 4097, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::eager, v2_eager_limit, Dialect::v2) == 0);
    CHECK(check(Mode::eager, v2_eager_limit + 1, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::eager, eager_limit + 1, Dialect::legacy) == -BMI_EPROTO);
    CHECK(check(Mode::eager, ~0ull, Dialect::legacy) == -BMI_EPROTO);
    CHECK(check(Mode::rendezvous, legacy_message_limit, Dialect::legacy) == 0);
    CHECK(check(Mode::rendezvous, legacy_message_limit + 1, Dialect::legacy) == -BMI_EPROTO);
    CHECK(check(Mode::rendezvous, 100000, Dialect::v2) == -BMI_EPROTO);  // v2 uses RTS
    CHECK(check(Mode::rts, 100, Dialect::v2) == 0);  // a peer with a smaller eager limit
    CHECK(check(Mode::rts, 1ull << 62, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::rts, 100000, Dialect::legacy) == -BMI_EPROTO);
    CHECK(check(Mode::data, data_chunk_limit, Dialect::v2) == 0);
    CHECK(check(Mode::data, data_chunk_limit + 1, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::data, 0, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::cts, 5, Dialect::v2) == -BMI_EPROTO);
    // GRANT: v2 only, a size within grant_size_limit, a cookie and no tag; an EAGER frame
    // under one (a cookie) may exceed the eager limit up to grant_size_limit.
    auto granted = [](Mode m, std::uint64_t size, std::uint64_t cookie, std::uint64_t tag,
                      Dialect d) {
        Header h;
        h.mode = m;
        h.size = size;
        h.cookie = cookie;
        h.tag = tag;
        return check_header(h, d, 4096);
    };
    CHECK(granted(Mode::grant, grant_size_limit, 9, 0, Dialect::v2) == 0);
    CHECK(granted(Mode::grant, grant_size_limit + 1, 9, 0, Dialect::v2) == -BMI_EPROTO);
    CHECK(granted(Mode::grant, 0, 9, 0, Dialect::v2) == -BMI_EPROTO);
    CHECK(granted(Mode::grant, 1 << 20, 0, 0, Dialect::v2) == -BMI_EPROTO);
    CHECK(granted(Mode::grant, 1 << 20, 9, 3, Dialect::v2) == -BMI_EPROTO);
    CHECK(granted(Mode::grant, 1 << 20, 9, 0, Dialect::legacy) == -BMI_EPROTO);
    CHECK(granted(Mode::eager, grant_size_limit, 9, 3, Dialect::v2) == 0);
    CHECK(granted(Mode::eager, grant_size_limit + 1, 9, 3, Dialect::v2) == -BMI_EPROTO);
    CHECK(granted(Mode::eager, v2_eager_limit + 1, 0, 3, Dialect::v2) == -BMI_EPROTO);
    CHECK(check(Mode::hello, hello_fixed_size, Dialect::first_inbound, hello_magic) == 0);
    CHECK(check(Mode::hello, hello_max_body + 1, Dialect::first_inbound, hello_magic) ==
          -BMI_EPROTO);
    CHECK(check(Mode::hello, hello_fixed_size, Dialect::v2, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::await_ack) == -BMI_EPROTO);
    CHECK(check(Mode::hello_ack, hello_fixed_size + 3, Dialect::await_ack, hello_magic) == 0);
}

TEST_CASE("HELLO has a magic of its own; the old form is accepted only as a first frame",
          "[tcp][wire]") {
    // Distinct from the legacy magic (an OrangeFS acceptor must reject it at its magic check)
    // and from 51912, the standalone dialect's.
    CHECK(hello_magic != wire_magic);
    CHECK(hello_magic != 51912u);
    auto check = [](Mode m, Dialect d, std::uint32_t magic) {
        Header h;
        h.magic = magic;
        h.mode = m;
        h.size = hello_fixed_size;
        return check_header(h, d, 4096);
    };
    // A libbmi client older than hello_magic sent HELLO under the legacy magic.
    CHECK(check(Mode::hello, Dialect::first_inbound, wire_magic) == 0);
    CHECK(check(Mode::hello_ack, Dialect::await_ack, wire_magic) == -BMI_EPROTO);
    CHECK(check(Mode::hello, Dialect::legacy, wire_magic) == -BMI_EPROTO);
    // Only HELLO and HELLO_ACK may use hello_magic.
    CHECK(check(Mode::eager, Dialect::first_inbound, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::eager, Dialect::legacy, hello_magic) == -BMI_EPROTO);

    auto frame = encode_hello(Hello{feature_rendezvous, ""}, false);
    CHECK(frame[0] == 'B');
    CHECK(frame[3] == 'H');
    Header h = decode_header(frame.data(), Framing::orangefs);
    CHECK(h.magic == hello_magic);
    CHECK(h.mode == Mode::hello);
    CHECK(check_header(h, Dialect::first_inbound, 4096) == 0);
    auto old_ack = encode_hello(Hello{feature_rendezvous, ""}, true, wire_magic);
    CHECK(decode_header(old_ack.data(), Framing::orangefs).magic == wire_magic);
}

TEST_CASE("the upgrade offer rides in the tag's upper half, which OrangeFS ignores",
          "[tcp][wire]") {
    for (bmi_msg_tag_t tag : {0, 1, -1, INT32_MIN, INT32_MAX}) {
        Header h;
        h.mode = Mode::eager;
        h.tag = offer_tag(tag);
        CHECK(offers_upgrade(h));
        CHECK(tag_of(h) == tag);  // what OrangeFS decodes too: the low 32 bits
        h.tag = wire_tag(tag);    // a sign extension is never an offer
        CHECK_FALSE(offers_upgrade(h));
    }
    auto check = [](Mode m, Dialect d, std::uint32_t magic) {
        Header h;
        h.magic = magic;
        h.mode = m;
        h.size = m == Mode::eager ? 10 : hello_fixed_size;
        return check_header(h, d, 4096);
    };
    // The offering client takes OrangeFS frames and HELLO_ACK; the acceptor that answered,
    // OrangeFS frames and HELLO. Nothing v2, nothing of the other side's handshake.
    CHECK(check(Mode::eager, Dialect::offering, wire_magic) == 0);
    CHECK(check(Mode::hello_ack, Dialect::offering, hello_magic) == 0);
    CHECK(check(Mode::hello_ack, Dialect::offering, wire_magic) == -BMI_EPROTO);
    CHECK(check(Mode::hello, Dialect::offering, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::rts, Dialect::offering, wire_magic) == -BMI_EPROTO);
    CHECK(check(Mode::eager, Dialect::offering, standalone_magic) == -BMI_EPROTO);
    CHECK(check(Mode::eager, Dialect::await_hello, wire_magic) == 0);
    CHECK(check(Mode::hello, Dialect::await_hello, hello_magic) == 0);
    CHECK(check(Mode::hello, Dialect::await_hello, wire_magic) == -BMI_EPROTO);
    CHECK(check(Mode::hello_ack, Dialect::await_hello, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::data, Dialect::await_hello, wire_magic) == -BMI_EPROTO);
    // An upgrade frame nobody offered for is out of step.
    CHECK(check(Mode::hello_ack, Dialect::legacy, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::hello_ack, Dialect::v2, hello_magic) == -BMI_EPROTO);
}

TEST_CASE("HELLO frames round trip", "[tcp][wire]") {
    Hello hello{feature_rendezvous, "tcp://node7:3334"};
    auto frame = encode_hello(hello, true);
    REQUIRE(frame.size() == legacy_header_size + hello_fixed_size + 16);
    Header h = decode_header(frame.data(), Framing::orangefs);
    CHECK(h.mode == Mode::hello_ack);
    CHECK(h.tag == protocol_version);
    CHECK(h.size == frame.size() - legacy_header_size);
    auto back = decode_hello_body({frame.data() + legacy_header_size, h.size});
    REQUIRE(back);
    CHECK(back->features == feature_rendezvous);
    CHECK(back->address == hello.address);
    // The reserved key-proof bytes are zero.
    for (std::size_t i = frame.size() - hello_reserved_size; i < frame.size(); ++i)
        CHECK(frame[i] == 0);
    // A length field that disagrees with the body is refused.
    frame[legacy_header_size + 8] = 200;
    CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
    CHECK_FALSE(decode_hello_body({frame.data(), 3}));
}

TEST_CASE("a HELLO states its unexpected limit in the features' upper half", "[tcp][wire]") {
    const std::uint64_t features = stating_unexpected_limit(our_features, 4096);
    CHECK((features & our_features) == our_features);
    CHECK(stated_unexpected_limit(features) == 4096);
    CHECK(stated_unexpected_limit(our_features) == 0);  // an older libbmi's, or OrangeFS's
    CHECK(stated_unexpected_limit(stating_unexpected_limit(0, 1 << 30)) == 1 << 30);
    Hello hello{features, "tcp://node7:3334"};
    auto frame = encode_hello(hello, false);
    auto back =
        decode_hello_body({frame.data() + legacy_header_size, frame.size() - legacy_header_size});
    REQUIRE(back);
    CHECK(stated_unexpected_limit(back->features) == 4096);
    // The proofs bind both features words in order: swapped, or with one bit less (large
    // EAGER frames stripped), they are other terms.
    const std::uint64_t other = stating_unexpected_limit(our_features, 16384);
    CHECK(hello_terms(features, other) != hello_terms(other, features));
    CHECK(hello_terms(features, other) != hello_terms(features & ~feature_large_eager, other));
    CHECK(hello_terms(features, other).size() == 16);
}

TEST_CASE("keyed HELLO frames carry a nonce, the ACK a proof, HELLO_PROOF only a proof",
          "[tcp][wire][keys]") {
    Hello ack{feature_rendezvous | feature_key_proof, "tcp://node7:3334"};
    ack.nonce.fill(0x5a);
    ack.proof.emplace();
    ack.proof->fill(0xa5);
    auto frame = encode_hello(ack, true);
    REQUIRE(frame.size() == legacy_header_size + hello_fixed_size + 16 + 32);
    Header h = decode_header(frame.data(), Framing::orangefs);
    CHECK(check_header(h, Dialect::await_ack, 4096) == 0);
    auto back = decode_hello_body({frame.data() + legacy_header_size, h.size});
    REQUIRE(back);
    CHECK(back->nonce == ack.nonce);
    REQUIRE(back->proof);
    CHECK(*back->proof == *ack.proof);
    // A proof from a sender that did not say it holds a key is malformed.
    frame[legacy_header_size] = static_cast<std::uint8_t>(feature_rendezvous);
    CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));

    auto proof = encode_hello_proof(*ack.proof);
    Header p = decode_header(proof.data(), Framing::orangefs);
    CHECK(p.magic == hello_magic);
    CHECK(check_header(p, Dialect::await_proof, 4096) == 0);
    CHECK(check_header(p, Dialect::first_inbound, 4096) == -BMI_EPROTO);
    CHECK(check_header(p, Dialect::v2, 4096) == -BMI_EPROTO);
    for (std::uint64_t size : {0ull, 31ull, 33ull, 1ull << 40}) {
        p.size = size;
        CHECK(check_header(p, Dialect::await_proof, 4096) == -BMI_EPROTO);
    }
    p.size = 32;
    p.magic = wire_magic;
    CHECK(check_header(p, Dialect::await_proof, 4096) == -BMI_EPROTO);
    Header eager;
    CHECK(check_header(eager, Dialect::await_proof, 4096) == -BMI_EPROTO);
}

TEST_CASE("a HELLO address longer than any encoder sends is refused", "[tcp][wire][fuzz]") {
    // Found by tests/fuzz/tcp_hello: the body bound leaves room for BMI_MAX_ADDR_LEN + 32
    // address bytes, and an address past BMI_MAX_ADDR_LEN was believed, though both sides
    // bind only hello_address() (its first BMI_MAX_ADDR_LEN bytes) into their proofs.
    constexpr std::size_t max = BMI_MAX_ADDR_LEN;
    for (std::size_t length : {max + 1, max + 32}) {
        std::vector<std::uint8_t> body(hello_fixed_size + length, 'x');
        body[8] = static_cast<std::uint8_t>(length);
        body[9] = static_cast<std::uint8_t>(length >> 8);
        for (std::size_t i = 0; i < 8; ++i) body[i] = 0;
        REQUIRE(body.size() <= hello_max_body);
        CHECK_FALSE(decode_hello_body(body));
    }
    Hello longest{0, std::string(max, 'a')};
    auto frame = encode_hello(longest, false);
    auto back = decode_hello_body(std::span(frame).subspan(legacy_header_size));
    REQUIRE(back);
    CHECK(back->address == longest.address);
}

TEST_CASE("tcp address parsing and ranges", "[tcp][address]") {
    auto a = parse_tcp_address("tcp://[::1]:80");
    REQUIRE(a);
    CHECK(a->canonical == "tcp://[::1]:80");
    CHECK(a->host == "::1");
    CHECK_FALSE(parse_tcp_address("tcp://host"));
    CHECK_FALSE(parse_tcp_address("udp://host:1"));

    SocketAddress v4;
    REQUIRE(resolve("192.168.1.77", 5, v4) == 0);
    CHECK(ip_text(v4) == "192.168.1.77");
    CHECK(describe(v4) == "tcp://192.168.1.77:5");
    CHECK(match_range(v4, "tcp://192.168.1.0", 24) == 1);
    CHECK(match_range(v4, "tcp://192.168.2.0", 24) == 0);
    CHECK(match_range(v4, "tcp://192.168.0.0", 16) == 1);
    CHECK(match_range(v4, "tcp://10.0.0.0", 0) == 1);
    CHECK(match_range(v4, "tcp://192.168.*", -1) == 1);
    CHECK(match_range(v4, "tcp://192.168.1.*", -1) == 1);
    CHECK(match_range(v4, "tcp://192.168.10.*", -1) == 0);
    CHECK(match_range(v4, "tcp://192.168.1.0", 33) == -BMI_EINVAL);
    CHECK(match_range(v4, "tcp://not-an-ip", 24) == -BMI_EINVAL);
    CHECK(match_range(v4, "192.168.1.0", 24) == -BMI_EINVAL);

    SocketAddress v6;
    REQUIRE(resolve("fe80::1:2", 5, v6) == 0);
    CHECK(match_range(v6, "tcp://fe80::", 64) == 1);
    CHECK(match_range(v6, "tcp://[fe81::]", 16) == 0);
    CHECK(match_range(v6, "tcp://192.168.1.0", 24) == 0);
    CHECK(match_range(v4, "tcp://fe80::", 64) == 0);
}

TEST_CASE("standalone legacy header: 25 bytes, u32 tag, address hash and class", "[tcp][wire]") {
    Header h;
    h.magic = standalone_magic;
    h.mode = Mode::unexpected;
    h.tag = wire_tag(-3);
    h.address_hash = 0xA1B2C3D4;
    h.size = 0x0102030405ull;
    h.msg_class = 7;
    std::uint8_t buf[max_header_size] = {};
    REQUIRE(encode_header(h, Framing::standalone, buf) == standalone_header_size);
    REQUIRE(header_size(Framing::standalone) == 25);
    // magic 51912 = 0xCAC8, little-endian; the tag is 32 bits, the hash right after it
    CHECK(buf[0] == 0xC8);
    CHECK(buf[1] == 0xCA);
    CHECK(buf[4] == 2);
    for (int i = 8; i < 12; ++i) CHECK(buf[i] == (i == 8 ? 0xFD : 0xFF));
    CHECK(buf[12] == 0xD4);
    CHECK(buf[15] == 0xA1);
    CHECK(buf[16] == 0x05);
    CHECK(buf[20] == 0x01);
    CHECK(buf[24] == 7);
    Header back = decode_header(buf, Framing::standalone);
    CHECK(back.magic == standalone_magic);
    CHECK(back.mode == Mode::unexpected);
    CHECK(tag_of(back) == -3);
    CHECK(back.tag == wire_tag(-3));  // the same value an OrangeFS header gives the tag
    CHECK(back.address_hash == h.address_hash);
    CHECK(back.size == h.size);
    CHECK(back.msg_class == 7);
}

TEST_CASE("a v2 UNEXP carries its class in the cookie, bounded to a byte", "[tcp][wire]") {
    Header h;
    h.mode = Mode::unexpected;
    h.size = 10;
    h.msg_class = 200;
    std::uint8_t buf[max_header_size] = {};
    encode_header(h, Framing::v2, buf);
    CHECK(buf[24] == 200);
    Header back = decode_header(buf, Framing::v2);
    CHECK(back.msg_class == 200);
    CHECK(check_header(back, Dialect::v2, 4096) == 0);
    back.cookie = 0x100;
    CHECK(check_header(back, Dialect::v2, 4096) == -BMI_EPROTO);
    // An OrangeFS header has no room for a class: it reads as 0.
    encode_header(h, Framing::orangefs, buf);
    CHECK(decode_header(buf, Framing::orangefs).msg_class == 0);
    // Other v2 frames keep their cookie.
    h.mode = Mode::rts;
    h.cookie = 0xabcdef;
    encode_header(h, Framing::v2, buf);
    CHECK(decode_header(buf, Framing::v2).cookie == 0xabcdef);
}

TEST_CASE("a first frame needs a 25th byte only under the standalone magic", "[tcp][wire]") {
    std::uint8_t buf[max_header_size] = {};
    Header h;
    h.magic = standalone_magic;
    encode_header(h, Framing::standalone, buf);
    const std::span<const std::uint8_t> none(buf, 0), magic_only(buf, 4);
    CHECK(header_bytes_needed(Dialect::first_inbound, none) == 24);
    CHECK(header_bytes_needed(Dialect::first_inbound, magic_only) == 25);
    CHECK(framing_of(Dialect::first_inbound, {buf, 25}) == Framing::standalone);
    CHECK(header_bytes_needed(Dialect::standalone, none) == 25);
    CHECK(header_bytes_needed(Dialect::v2, none) == 32);
    CHECK(framing_of(Dialect::v2, none) == Framing::v2);
    for (std::uint32_t magic : {wire_magic, hello_magic, 12345u}) {
        h.magic = magic;
        encode_header(h, Framing::orangefs, buf);
        CHECK(header_bytes_needed(Dialect::first_inbound, {buf, 24}) == 24);
        CHECK(framing_of(Dialect::first_inbound, {buf, 24}) == Framing::orangefs);
        CHECK(header_bytes_needed(Dialect::legacy, {buf, 24}) == 24);
    }
}

TEST_CASE("the standalone framing has OrangeFS's limits and keeps its own magic", "[tcp][wire]") {
    auto check = [](Mode m, std::uint64_t size, Dialect d, std::uint32_t magic) {
        Header h;
        h.magic = magic;
        h.mode = m;
        h.size = size;
        return check_header(h, d, 4096);
    };
    const auto s = standalone_magic;
    const auto o = wire_magic;
    // Every bound, in the standalone connection state.
    CHECK(check(Mode::unexpected, 4096, Dialect::standalone, s) == 0);
    CHECK(check(Mode::unexpected, 4097, Dialect::standalone, s) == -BMI_EPROTO);
    CHECK(check(Mode::eager, eager_limit, Dialect::standalone, s) == 0);
    CHECK(check(Mode::eager, eager_limit + 1, Dialect::standalone, s) == -BMI_EPROTO);
    CHECK(check(Mode::rendezvous, legacy_message_limit, Dialect::standalone, s) == 0);
    CHECK(check(Mode::rendezvous, legacy_message_limit + 1, Dialect::standalone, s) == -BMI_EPROTO);
    CHECK(check(Mode::rendezvous, ~0ull, Dialect::standalone, s) == -BMI_EPROTO);
    for (Mode m : {Mode::rts, Mode::cts, Mode::nak, Mode::data, Mode::hello, Mode::hello_ack,
                   Mode::hello_proof})
        CHECK(check(m, 0, Dialect::standalone, s) == -BMI_EPROTO);
    // The same bounds for a first frame under either legacy magic.
    for (std::uint32_t magic : {s, o}) {
        CHECK(check(Mode::unexpected, 4096, Dialect::first_inbound, magic) == 0);
        CHECK(check(Mode::unexpected, 4097, Dialect::first_inbound, magic) == -BMI_EPROTO);
        CHECK(check(Mode::eager, eager_limit + 1, Dialect::first_inbound, magic) == -BMI_EPROTO);
        CHECK(check(Mode::rendezvous, legacy_message_limit, Dialect::first_inbound, magic) == 0);
        CHECK(check(Mode::rendezvous, legacy_message_limit + 1, Dialect::first_inbound, magic) ==
              -BMI_EPROTO);
    }
    // Magic checks in every connection state.
    CHECK(check(Mode::eager, 10, Dialect::standalone, o) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::legacy, s) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::v2, s) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::await_ack, s) == -BMI_EPROTO);
    CHECK(check(Mode::hello_ack, hello_fixed_size, Dialect::await_ack, s) == -BMI_EPROTO);
    CHECK(check(Mode::hello_proof, 32, Dialect::await_proof, s) == -BMI_EPROTO);
    CHECK(check(Mode::hello, hello_fixed_size, Dialect::first_inbound, s) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::first_inbound, hello_magic) == -BMI_EPROTO);
    CHECK(check(Mode::eager, 10, Dialect::first_inbound, 12345) == -BMI_EPROTO);
    CHECK(magic_of(Framing::standalone) == s);
    CHECK(magic_of(Framing::orangefs) == o);
    CHECK(magic_of(Framing::v2) == o);
}

TEST_CASE("a listen address may leave out its port only where that is allowed", "[tcp][wire]") {
    CHECK_FALSE(parse_listen_address("tcp://127.0.0.1", false));
    auto parsed = parse_listen_address("tcp://127.0.0.1", true);
    REQUIRE(parsed);
    CHECK(parsed->host == "127.0.0.1");
    CHECK(parsed->port == 0);
    auto v6 = parse_listen_address("tcp://[::1]", true);
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(parse_listen_address("tcp://node1:3334", true)->port == 3334);
    CHECK_FALSE(parse_listen_address("tcp://node1:", true));
    CHECK_FALSE(parse_listen_address("tcp://[::1]:", true));
    CHECK_FALSE(parse_listen_address("shm://node1", true));
    CHECK_FALSE(parse_listen_address("tcp://", true));
}

// GCC 12 at -O1 (the ASan build) warns that the string in the optional offer "may be used
// uninitialized" where ack.offer is assigned: the empty optional is constructed there, nothing
// reads it, and -O3 does not warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
TEST_CASE("a same-node offer rides last in HELLO_ACK, after a proof", "[tcp][wire][same_node]") {
    bmi::method::kit::SameNodeOffer offer;
    offer.shm_name = "same-node.tcp-3334";
    offer.listener_nonce = 0x0102030405060708u;
    offer.ticket.fill(0x77);
    for (const bool keyed : {false, true}) {
        INFO("keyed " << keyed);
        Hello ack{feature_rendezvous | feature_same_node | (keyed ? feature_key_proof : 0),
                  "tcp://node7:3334"};
        if (keyed) {
            ack.proof.emplace();
            ack.proof->fill(0xa5);
        }
        ack.offer = offer;
        auto frame = encode_hello(ack, true);
        Header h = decode_header(frame.data(), Framing::orangefs);
        CHECK(check_header(h, Dialect::await_ack, 4096) == 0);
        auto back = decode_hello_body({frame.data() + legacy_header_size, h.size});
        REQUIRE(back);
        REQUIRE(back->offer);
        CHECK(back->offer->shm_name == offer.shm_name);
        CHECK(back->offer->listener_nonce == offer.listener_nonce);
        CHECK(back->offer->ticket == offer.ticket);
        CHECK(back->proof.has_value() == keyed);
        if (keyed) CHECK(*back->proof == *ack.proof);
        // The bit alone ("ask again") carries no block, and a block without the bit is not one.
        ack.offer.reset();
        const auto later_frame = encode_hello(ack, true);
        auto later = decode_hello_body(
            std::span<const std::uint8_t>(later_frame).subspan(legacy_header_size));
        REQUIRE(later);
        CHECK_FALSE(later->offer);
        frame[legacy_header_size] &= static_cast<std::uint8_t>(~feature_same_node);
        CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
        // An empty or oversized name is refused.
        frame[legacy_header_size] |= static_cast<std::uint8_t>(feature_same_node);
        const std::size_t name_at = frame.size() - same_node_offer_size;
        frame[name_at] = 0;
        CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
        frame[name_at] = same_node_name_room + 1;
        CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
        // Bytes in the name's padding are not something encode_hello sends.
        frame[name_at] = static_cast<std::uint8_t>(offer.shm_name.size());
        REQUIRE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
        frame[name_at + 1 + same_node_name_room - 1] = 'x';
        CHECK_FALSE(decode_hello_body({frame.data() + legacy_header_size, h.size}));
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
