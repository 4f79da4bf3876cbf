// SPDX-License-Identifier: LGPL-2.1-or-later
// Security keys: key files (sources, permissions, formats) and the handshake proof.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "../key_files.hpp"
#include "bmi-types.h"
#include "support/keys/key_proof.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"

using namespace bmi::support::keys;
using bmi::test::KeyFiles;

namespace {
SharedKey load(const std::string& path) {
    SharedKey key;
    REQUIRE(load_key_file(path, key) == 0);
    REQUIRE(key);
    return key;
}

Transcript sample() {
    Transcript t;
    t.plane = "tcp";
    t.initiator_nonce = fresh_nonce();
    t.acceptor_nonce = fresh_nonce();
    t.acceptor_address = "tcp://127.0.0.1:3334";
    t.initiator_address = "";
    return t;
}
}  // namespace

TEST_CASE("a key file holds 32 raw bytes or 64 hex digits", "[keys]") {
    KeyFiles files;
    auto raw = load(files.key("raw", 0xab));
    std::string hex(64, 'a');
    hex[0] = 'b';
    auto text = load(files.write("hex", std::vector<std::uint8_t>(hex.begin(), hex.end())));
    hex += "\n";
    auto line = load(files.write("line", std::vector<std::uint8_t>(hex.begin(), hex.end())));
    CHECK(raw->bytes()[0] == 0xab);
    CHECK(text->bytes()[0] == 0xba);
    CHECK(line->bytes()[31] == 0xaa);
}

TEST_CASE("a key file others can read or write is refused", "[keys]") {
    KeyFiles files;
    SharedKey key;
    CHECK(load_key_file(files.write("world", std::vector<std::uint8_t>(32, 1), 0644), key) ==
          -BMI_EACCES);
    CHECK(load_key_file(files.write("group", std::vector<std::uint8_t>(32, 1), 0620), key) ==
          -BMI_EACCES);
    CHECK(load_key_file(files.write("others_w", std::vector<std::uint8_t>(32, 1), 0602), key) ==
          -BMI_EACCES);
    CHECK(load_key_file(files.dir(), key) == -BMI_EACCES);  // a directory is not a key file
    CHECK_FALSE(key);
    CHECK(load_key_file(files.write("owner_only", std::vector<std::uint8_t>(32, 1), 0400), key) ==
          0);
}

TEST_CASE("a FIFO as the key file is refused at once, not waited on", "[keys]") {
    KeyFiles files;
    SharedKey key;
    const std::string fifo = files.fifo("fifo");
    const auto rc = bmi::test::returns_within(std::chrono::seconds(3), fifo,
                                              [&] { return load_key_file(fifo, key); });
    REQUIRE(rc);
    CHECK(*rc == -BMI_EACCES);
    CHECK_FALSE(key);
}

TEST_CASE("a missing, short, long or malformed key file is refused", "[keys]") {
    KeyFiles files;
    SharedKey key;
    CHECK(load_key_file(files.dir() + "/absent", key) == -BMI_ENOENT);
    CHECK(load_key_file(files.write("empty", {}), key) == -BMI_EINVAL);
    CHECK(load_key_file(files.write("short", std::vector<std::uint8_t>(31, 1)), key) ==
          -BMI_EINVAL);
    CHECK(load_key_file(files.write("long", std::vector<std::uint8_t>(33, 1)), key) == -BMI_EINVAL);
    CHECK(load_key_file(files.write("huge", std::vector<std::uint8_t>(4096, '0')), key) ==
          -BMI_EINVAL);
    std::string bad(64, 'g');
    CHECK(load_key_file(files.write("nothex", std::vector<std::uint8_t>(bad.begin(), bad.end())),
                        key) == -BMI_EINVAL);
    CHECK_FALSE(key);
}

TEST_CASE("the key_file option wins over BMI_KEY_FILE; neither means no key", "[keys]") {
    KeyFiles files;
    // As an instance reads its settings: the environment, then the option string.
    const auto key_from_options = [](const std::string& options, SharedKey& out) {
        bmi::support::Settings settings(bmi::support::general_settings());
        REQUIRE(settings.load(options) == 0);
        return key_from_settings(settings, out);
    };
    const std::string env_key = files.key("env", 1);
    const std::string option_key = files.key("option", 2);
    SharedKey key;
    unsetenv("BMI_KEY_FILE");
    CHECK(key_from_options("unexpected_limit=100", key) == 0);
    CHECK_FALSE(key);
    setenv("BMI_KEY_FILE", env_key.c_str(), 1);
    REQUIRE(key_from_options("", key) == 0);
    CHECK(key->bytes()[0] == 1);
    REQUIRE(key_from_options("unexpected_limit=100,key_file=" + option_key, key) == 0);
    CHECK(key->bytes()[0] == 2);
    setenv("BMI_KEY_FILE", (files.dir() + "/absent").c_str(), 1);
    CHECK(key_from_options("", key) == -BMI_ENOENT);
    unsetenv("BMI_KEY_FILE");
}

TEST_CASE("a proof verifies under the same key, role and transcript only", "[keys]") {
    KeyFiles files;
    auto key = load(files.key("k", 7));
    auto other = load(files.key("other", 8));
    const Transcript t = sample();
    const Proof proof = prove(*key, Role::acceptor, t);

    CHECK(verify(*key, Role::acceptor, t, proof));
    SECTION("wrong key") { CHECK_FALSE(verify(*other, Role::acceptor, t, proof)); }
    SECTION("the proof reflected as the other role's") {
        CHECK_FALSE(verify(*key, Role::initiator, t, proof));
    }
    SECTION("a replayed proof meets a fresh nonce") {
        Transcript replay = t;
        replay.acceptor_nonce = fresh_nonce();
        CHECK_FALSE(verify(*key, Role::acceptor, replay, proof));
        replay = t;
        replay.initiator_nonce = fresh_nonce();
        CHECK_FALSE(verify(*key, Role::acceptor, replay, proof));
    }
    SECTION("another plane or other addresses") {
        Transcript moved = t;
        moved.plane = "shm";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, proof));
        moved = t;
        moved.acceptor_address = "tcp://127.0.0.1:3335";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, proof));
        moved = t;
        moved.initiator_address = "tcp://10.0.0.1:1";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, proof));
        // Fields are length-prefixed: moving a byte from one address to the next changes it.
        moved = t;
        moved.acceptor_address = "tcp://127.0.0.1:333";
        moved.initiator_address = "4";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, proof));
    }
    SECTION("other stated limits, or limits where there were none") {
        Transcript moved = t;
        moved.terms = "limits";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, proof));
        const Proof with_terms = prove(*key, Role::acceptor, moved);
        moved.terms = "limitz";
        CHECK_FALSE(verify(*key, Role::acceptor, moved, with_terms));
    }
    SECTION("truncated, extended or flipped proof") {
        std::span<const std::uint8_t> all(proof);
        CHECK_FALSE(verify(*key, Role::acceptor, t, all.first(31)));
        CHECK_FALSE(verify(*key, Role::acceptor, t, {}));
        std::vector<std::uint8_t> longer(proof.begin(), proof.end());
        longer.push_back(0);
        CHECK_FALSE(verify(*key, Role::acceptor, t, longer));
        Proof flipped = proof;
        flipped[31] ^= 1;
        CHECK_FALSE(verify(*key, Role::acceptor, t, flipped));
    }
}

TEST_CASE("nonces are fresh", "[keys]") { CHECK(fresh_nonce() != fresh_nonce()); }

TEST_CASE("refusals are logged once per source per interval, in bounded memory", "[keys]") {
    using namespace std::chrono_literals;
    RefusalLog log(60s, 2);
    const auto t0 = RefusalLog::Clock::now();
    CHECK(log.should_log("a", t0));
    CHECK_FALSE(log.should_log("a", t0 + 1s));
    CHECK(log.should_log("b", t0 + 1s));
    CHECK(log.should_log("a", t0 + 61s));
    CHECK(log.should_log("c", t0 + 61s));  // over capacity: starts over
    CHECK(log.refused() == 5);
    CHECK(log.suppressed() == 1);
}
