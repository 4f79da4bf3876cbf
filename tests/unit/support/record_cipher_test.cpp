// SPDX-License-Identifier: LGPL-2.1-or-later
// Traffic keys and record encryption (issue 39): both sides derive the same keys and nobody
// else does; a record opens only once, in order, unchanged, under the key its number says.
#include <catch2/catch.hpp>

#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/keys/record_cipher.hpp"
#include "support/keys/traffic_keys.hpp"

using namespace bmi::support::keys;

namespace {

std::unique_ptr<SecretKey> make_key(std::uint8_t fill) {
    std::array<std::uint8_t, key_size> bytes;
    bytes.fill(fill);
    return SecretKey::from_bytes(bytes);
}

std::vector<std::uint8_t> transcript_of(const std::string& text) {
    return {text.begin(), text.end()};
}

// What both ends of one handshake hold afterwards.
struct Handshake {
    EphemeralKey initiator;
    EphemeralKey acceptor;
    TrafficKeys initiator_keys;
    TrafficKeys acceptor_keys;
    Handshake(const SecretKey& psk, const std::vector<std::uint8_t>& transcript, Cipher cipher) {
        SharedSecret a;
        SharedSecret b;
        REQUIRE(initiator.agree(acceptor.public_key(), a));
        REQUIRE(acceptor.agree(initiator.public_key(), b));
        REQUIRE(a == b);
        initiator_keys = derive_traffic_keys(psk, transcript, a, cipher);
        acceptor_keys = derive_traffic_keys(psk, transcript, b, cipher);
    }
};

struct Record {
    std::vector<std::uint8_t> header;
    std::vector<std::uint8_t> data;
    std::array<std::uint8_t, record_tag_size> tag{};
};

Record seal(RecordCipher& sender, const std::string& header, const std::string& text) {
    Record r{transcript_of(header), transcript_of(text), {}};
    sender.seal(r.header, r.data, r.tag);
    return r;
}

bool open(RecordCipher& receiver, Record r, std::string* text = nullptr) {
    const bool ok = receiver.open(r.header, r.data, r.tag);
    if (ok && text != nullptr) text->assign(r.data.begin(), r.data.end());
    return ok;
}

std::vector<Cipher> available_ciphers() {
    std::vector<Cipher> out;
    for (Cipher c : {Cipher::aes256gcm, Cipher::chacha20poly1305})
        if (cipher_available(c)) out.push_back(c);
    return out;
}

}  // namespace

TEST_CASE("both ends of a handshake derive the same keys, one per direction") {
    auto psk = make_key(7);
    REQUIRE(psk);
    Handshake h(*psk, transcript_of("nonces, endpoints, public keys"), Cipher::chacha20poly1305);
    CHECK(h.initiator_keys.initiator_to_acceptor.key == h.acceptor_keys.initiator_to_acceptor.key);
    CHECK(h.initiator_keys.initiator_to_acceptor.iv == h.acceptor_keys.initiator_to_acceptor.iv);
    CHECK(h.initiator_keys.acceptor_to_initiator.key == h.acceptor_keys.acceptor_to_initiator.key);
    CHECK(h.initiator_keys.initiator_to_acceptor.key != h.initiator_keys.acceptor_to_initiator.key);

    SECTION("another transcript, key, cipher or ephemeral secret gives other keys") {
        SharedSecret shared;
        REQUIRE(h.initiator.agree(h.acceptor.public_key(), shared));
        const auto base =
            derive_traffic_keys(*psk, transcript_of("t"), shared, Cipher::chacha20poly1305);
        auto other_psk = make_key(8);
        SharedSecret other_shared = shared;
        other_shared[0] ^= 1;
        const auto differ = [&](const TrafficKeys& k) {
            return k.initiator_to_acceptor.key != base.initiator_to_acceptor.key;
        };
        CHECK(differ(
            derive_traffic_keys(*psk, transcript_of("u"), shared, Cipher::chacha20poly1305)));
        CHECK(differ(
            derive_traffic_keys(*other_psk, transcript_of("t"), shared, Cipher::chacha20poly1305)));
        CHECK(differ(derive_traffic_keys(*psk, transcript_of("t"), shared, Cipher::aes256gcm)));
        CHECK(differ(
            derive_traffic_keys(*psk, transcript_of("t"), other_shared, Cipher::chacha20poly1305)));
    }
}

TEST_CASE("a public key that forces the all-zero secret is refused") {
    EphemeralKey mine;
    SharedSecret out;
    out.fill(0xaa);
    PublicKey zero{};
    CHECK_FALSE(mine.agree(zero, out));
    CHECK(out == SharedSecret{});
}

TEST_CASE("the acceptor picks AES-256-GCM when both run it, else ChaCha20-Poly1305") {
    const auto aes = cipher_bit(Cipher::aes256gcm);
    const auto chacha = cipher_bit(Cipher::chacha20poly1305);
    CHECK(choose_cipher(aes | chacha, aes | chacha) == Cipher::aes256gcm);
    CHECK(choose_cipher(chacha, aes | chacha) == Cipher::chacha20poly1305);
    CHECK(choose_cipher(aes | chacha, chacha) == Cipher::chacha20poly1305);
    CHECK(choose_cipher(aes, chacha) == Cipher::none);
    CHECK(choose_cipher(0, aes | chacha) == Cipher::none);
    CHECK((ciphers_available() & chacha) != 0);  // libsodium runs it everywhere
}

TEST_CASE("records open once, in order and unchanged") {
    const Cipher cipher = GENERATE(from_range(available_ciphers()));
    INFO("cipher " << static_cast<int>(cipher));
    auto psk = make_key(1);
    Handshake h(*psk, transcript_of("t"), cipher);
    RecordCipher sender(cipher, h.initiator_keys.initiator_to_acceptor, default_rekey_interval);
    RecordCipher receiver(cipher, h.acceptor_keys.initiator_to_acceptor, default_rekey_interval);

    SECTION("the data is not in the sealed record, and comes back whole") {
        const std::string secret = "file system block: pattern 0123456789";
        Record r = seal(sender, "hdr", secret);
        CHECK(std::string(r.data.begin(), r.data.end()) != secret);
        CHECK(std::search(r.data.begin(), r.data.end(), secret.begin() + 5, secret.begin() + 15) ==
              r.data.end());
        std::string got;
        REQUIRE(open(receiver, r, &got));
        CHECK(got == secret);
        Record empty = seal(sender, "only a header", "");
        CHECK(open(receiver, empty));
    }
    SECTION("a changed header, data byte or tag fails, and so does every record after it") {
        const int which = GENERATE(0, 1, 2);
        Record r = seal(sender, "hdr", "payload");
        if (which == 0) r.header[1] ^= 1;
        if (which == 1) r.data[3] ^= 0x80;
        if (which == 2) r.tag[15] ^= 1;
        CHECK_FALSE(receiver.open(r.header, r.data, r.tag));
        CHECK(receiver.failed());
        CHECK(r.data == std::vector<std::uint8_t>(r.data.size(), 0));  // nothing half-decrypted
        Record next = seal(sender, "hdr", "next");
        CHECK_FALSE(open(receiver, next));
    }
    SECTION("a repeated, dropped or swapped record fails") {
        const int which = GENERATE(0, 1, 2);
        Record first = seal(sender, "h", "one");
        Record second = seal(sender, "h", "two");
        if (which == 0) {
            REQUIRE(open(receiver, first));
            CHECK_FALSE(open(receiver, first));
        } else if (which == 1) {
            CHECK_FALSE(open(receiver, second));
        } else {
            CHECK_FALSE(open(receiver, second));
            CHECK_FALSE(open(receiver, first));
        }
    }
    SECTION("a record cut short fails") {
        Record r = seal(sender, "h", "a longer payload");
        r.data.pop_back();
        CHECK_FALSE(open(receiver, r));
    }
    SECTION("the other direction's key opens nothing") {
        RecordCipher wrong(cipher, h.acceptor_keys.acceptor_to_initiator, default_rekey_interval);
        CHECK_FALSE(open(wrong, seal(sender, "h", "x")));
    }
}

TEST_CASE("both sides step to the next key at the same record, and the old key is refused") {
    const Cipher cipher = GENERATE(from_range(available_ciphers()));
    auto psk = make_key(2);
    Handshake h(*psk, transcript_of("t"), cipher);
    RecordCipher sender(cipher, h.initiator_keys.initiator_to_acceptor, 3);
    RecordCipher receiver(cipher, h.acceptor_keys.initiator_to_acceptor, 3);
    for (int i = 0; i < 100; ++i) {
        std::string got;
        REQUIRE(open(receiver, seal(sender, "h", "record " + std::to_string(i)), &got));
        CHECK(got == "record " + std::to_string(i));
    }
    CHECK(sender.keys_used() == 34);
    CHECK(receiver.keys_used() == 34);

    // A sender that never rekeys seals record 3 under the first key: the receiver, on its
    // second key by then, refuses it.
    RecordCipher stale(cipher, h.initiator_keys.initiator_to_acceptor, default_rekey_interval);
    RecordCipher fresh(cipher, h.acceptor_keys.initiator_to_acceptor, 3);
    for (int i = 0; i < 3; ++i) REQUIRE(open(fresh, seal(stale, "h", "ok")));
    CHECK_FALSE(open(fresh, seal(stale, "h", "under the old key")));
}

TEST_CASE("a recording cannot be opened with the pre-shared key and the transcript alone") {
    const Cipher cipher = GENERATE(from_range(available_ciphers()));
    auto psk = make_key(3);
    const auto transcript = transcript_of("everything the proofs covered");
    Handshake h(*psk, transcript, cipher);
    RecordCipher sender(cipher, h.initiator_keys.initiator_to_acceptor, default_rekey_interval);
    const Record recorded = seal(sender, "h", "secret block");

    // Whoever later learns the key has the transcript and both public keys, not the
    // ephemeral secrets: each secret it can compute (its own pair against either public key,
    // or none at all) gives keys that open nothing.
    EphemeralKey attacker;
    std::vector<SharedSecret> guesses(3);
    REQUIRE(attacker.agree(h.initiator.public_key(), guesses[0]));
    REQUIRE(attacker.agree(h.acceptor.public_key(), guesses[1]));
    for (const SharedSecret& guess : guesses) {
        const TrafficKeys keys = derive_traffic_keys(*psk, transcript, guess, cipher);
        RecordCipher opener(cipher, keys.initiator_to_acceptor, default_rekey_interval);
        CHECK_FALSE(open(opener, recorded));
    }
    RecordCipher rightful(cipher, h.acceptor_keys.initiator_to_acceptor, default_rekey_interval);
    CHECK(open(rightful, recorded));
}

// The wire format is the AEADs' standard one (and what libbmi sealed with libsodium before the
// records moved to libcrypto): libsodium opens what RecordCipher seals, record by record.
TEST_CASE("libsodium opens the records RecordCipher seals") {
    for (Cipher cipher : available_ciphers()) {
        CAPTURE(static_cast<int>(cipher));
        DirectionKey k;
        k.key.fill(3);
        for (std::size_t i = 0; i < k.iv.size(); ++i) k.iv[i] = static_cast<std::uint8_t>(i * 11);
        RecordCipher sealer(cipher, k, default_rekey_interval);
        for (std::uint64_t number = 0; number < 3; ++number) {
            const std::array<std::uint8_t, 4> header{1, 2, 3, static_cast<std::uint8_t>(number)};
            std::vector<std::uint8_t> plain(1000 + number);
            for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint8_t>(i);
            std::vector<std::uint8_t> data = plain;
            std::array<std::uint8_t, record_tag_size> tag{};
            sealer.seal(header, data, tag);
            std::array<std::uint8_t, traffic_iv_size> nonce = k.iv;
            nonce.back() ^= static_cast<std::uint8_t>(number);  // the record's number, big-endian
            std::vector<std::uint8_t> opened(data.size());
            const int rc = cipher == Cipher::aes256gcm
                               ? crypto_aead_aes256gcm_decrypt_detached(
                                     opened.data(), nullptr, data.data(), data.size(), tag.data(),
                                     header.data(), header.size(), nonce.data(), k.key.data())
                               : crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                                     opened.data(), nullptr, data.data(), data.size(), tag.data(),
                                     header.data(), header.size(), nonce.data(), k.key.data());
            CHECK(rc == 0);
            CHECK(opened == plain);
        }
    }
}
