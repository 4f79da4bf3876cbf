// SPDX-License-Identifier: LGPL-2.1-or-later
// The rules every method applies to a peer it does not trust yet (issue 37), written once and
// run for every compiled method through its adapter (attacker.hpp): verbs in the soft-RoCE
// guest. Each rule's bound and setting per method are rows of doc/RELIABILITY.md. This file:
// keys, the setup deadline, announced names, a handshake carried across two connections;
// peer_rules_resources_test.cpp: early data and descriptors; peer_rules_resolver_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../unit/key_files.hpp"
#include "attacker.hpp"
#include "both_paths.hpp"
#include "harness.hpp"
#include "key_test_steps.hpp"
#include "peer_rules.hpp"

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;

// Keys. Right key (or none on either side): as usual; wrong or one-sided: refused.

TEST_CASE("peer rules: instances with the same key, or with none, talk as usual", "[rules][keys]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool keyed = GENERATE(true, false);
    INFO("method " << scheme << (keyed ? ", both with one key" : ", no key on either side"));
    KeyFiles files;
    Pair pair = make_peers(scheme, keyed ? key_option(files.key("k", 1)) : std::string());
    both_paths_work(pair);
}

TEST_CASE("peer rules: a wrong key, or a key on one side only, is refused with -BMI_EACCES",
          "[rules][keys]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    // Which key file each side names, 0 for none: wrong key, server only, client only.
    const auto [server_key, client_key] =
        GENERATE(table<std::uint8_t, std::uint8_t>({{1, 2}, {1, 0}, {0, 1}}));
    INFO("method " << scheme << ", server key " << int(server_key) << ", client key "
                   << int(client_key));
    const MethodAdapter& adapter = adapter_for(scheme);
    KeyFiles files;
    auto options = [&](std::uint8_t which) {
        if (which == 0) return std::string();
        // Appended, not "k" + to_string: gcc 12 at -O3 sees a false -Wrestrict in the latter.
        std::string name = "k";
        name += std::to_string(which);
        return key_option(files.key(name, which));
    };
    Pair pair = make_peers(scheme, options(server_key), options(client_key));
    {
        Pump pump(*pair.server.instance);
        for (int attempt = 0; attempt < 2; ++attempt) {  // a second try is refused again
            const int error = send_first(pair, 30000);
            if (client_key != 0 || !adapter.refused_send_may_complete) CHECK(error == -BMI_EACCES);
        }
    }
    // Nothing of the refused peer reached the application.
    CHECK(server_sees_nothing(pair, 300));
}

// Refused clients that come and go: however many there were, each is refused and leaves
// nothing the next client would miss (the address vector of libfabric's shm holds 256).
TEST_CASE("peer rules: more refused clients than a server holds at once leave nothing behind",
          "[rules][keys][churn]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    // Refused at the hello (no key) or at the proof (another key).
    const bool keyless = GENERATE(true, false);
    INFO("method " << scheme << (keyless ? ", clients without a key" : ", clients of another key"));
    const MethodAdapter& adapter = adapter_for(scheme);
    KeyFiles files;
    const std::string right = key_option(files.key("k1", 1));
    const std::string wrong = keyless ? std::string() : key_option(files.key("k2", 2));
    Pair pair = make_peers(scheme, right, wrong);
    const std::string listen = pair.server.instance->listen_addresses();
    const int clients = churn_clients(scheme);
    Pump pump(*pair.server.instance);
    for (int i = 0; i < clients; ++i) {
        INFO("refused client " << i);
        if (i > 0) {
            pair.client.instance.reset();  // the last one leaves before the next comes
            pair.client = make_client(wrong, listen, pair.server_addr);
        }
        const int error = send_first(pair, 30000);
        if (!adapter.refused_send_may_complete) REQUIRE(error == -BMI_EACCES);
    }
    pair.client.instance.reset();
    pair.client = make_client(right, listen, pair.server_addr);
    CHECK(send_first(pair, 30000) == 0);
}

// Setup deadline. An accepted connection that does not finish its handshake, keyless
// and silent or keyed without its proof, is closed at the deadline; clients are served after.

TEST_CASE("peer rules: a handshake not finished by the setup deadline is closed then",
          "[rules][deadline]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool keyed = GENERATE(false, true);
    INFO("method " << scheme << (keyed ? ", keyed hello and no proof" : ", silent connection"));
    const MethodAdapter& adapter = adapter_for(scheme);
    if (!keyed && !adapter.silent_gap.empty()) {
        WARN("SKIP (not applicable) " << scheme << ": " << adapter.silent_gap);
        return;
    }
    const int deadline_ms = shortest_setup_deadline_ms(scheme);
    KeyFiles files;
    const std::string key = keyed ? key_option(files.key("k", 1)) : std::string();
    // Only the listener is on the short clock: the legitimate client keeps its own default.
    Pair pair = make_peers(scheme, joined(adapter.setup_deadline_option(deadline_ms), key), key);
    {
        Pump pump(*pair.server.instance);
        auto attacker = adapter.attack(pair.server.instance->listen_addresses());
        REQUIRE(attacker->connected());
        const auto start = Clock::now();
        if (keyed) REQUIRE(attacker->send_keyed_hello(5000));
        if (auto held = adapter.unproven_held(*pair.server.instance)) {
            // The provider keeps the connection beneath: the listener's own state is what goes.
            CHECK(*held > 0);
            const auto until = start + std::chrono::milliseconds(deadline_ms + 3000);
            while (*held > 0 && Clock::now() < until) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                held = adapter.unproven_held(*pair.server.instance);
            }
            CHECK(*held == 0);
        } else {
            CHECK(attacker->closed_within(deadline_ms + 3000));
        }
        CHECK(Clock::now() - start >= std::chrono::milliseconds(deadline_ms * 3 / 4));
        // A client through its handshake is not on that clock.
        CHECK(send_first(pair, 10000) == 0);
    }
}

// An initiator's setup deadline. A listener that queues our connection and never answers
// its hello holds the sends that wait on the handshake only until the setup deadline: each
// completes by then (a keyless legacy send is written at once and may succeed), and with a key
// every one fails, since no answer can prove it.

TEST_CASE("peer rules: a handshake the listener never answers ends at the initiator's deadline",
          "[rules][deadline]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool keyed = GENERATE(false, true);
    INFO("method " << scheme << (keyed ? ", keyed" : ", keyless"));
    const MethodAdapter& adapter = adapter_for(scheme);
    constexpr int deadline_ms = 400;
    KeyFiles files;
    SilentListener silent(scheme);
    Side client;
    core::InitParams params;
    params.options = joined(adapter.setup_deadline_option(deadline_ms),
                            keyed ? key_option(files.key("k", 1)) : std::string());
    params.dialect = selected_dialect();
    REQUIRE(core::Instance::create(params, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    BMI_addr_t silent_addr = 0;
    REQUIRE(client.instance->addr_lookup(silent.address(), silent_addr) == 0);

    std::vector<char> data(1024, 'x');
    const auto start = Clock::now();
    std::vector<bmi_op_id_t> ids;
    for (int i = 0; i < 2; ++i) {
        bmi_op_id_t id = 0;
        bmi_size_t actual = -1;
        const int rc = client.instance->post(
            send_request(client, silent_addr, data.data(), static_cast<bmi_size_t>(data.size()), 7),
            id, &actual);
        REQUIRE(rc >= 0);
        if (rc == 0) ids.push_back(id);  // 1: done at once (written, keyless)
    }
    int failed = 0;
    for (bmi_op_id_t id : ids) {
        const core::Completion done = wait_op(client, id, deadline_ms + 3000);
        if (done.error != 0) {
            CHECK(done.error == -BMI_ETIMEDOUT);
            ++failed;
        }
    }
    CHECK(Clock::now() - start <= std::chrono::milliseconds(deadline_ms + 3000));
    if (keyed) {
        CHECK(failed == 2);
        CHECK(Clock::now() - start >= std::chrono::milliseconds(deadline_ms * 3 / 4));
    }
}

// An announced name without proof. A connection that announces another server's
// address and never proves the key routes nothing: what the server sends to that address
// reaches the real holder.

TEST_CASE("peer rules: an announced name without proof does not take its holder's traffic",
          "[rules][announced]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    const MethodAdapter& adapter = adapter_for(scheme);
    KeyFiles files;
    const std::string key = key_option(files.key("k", 1));
    Pair pair = make_peers(scheme, key);
    Side holder = listening(scheme, key);  // another keyed server, whose address is claimed
    const std::string holder_address = holder.instance->listen_addresses();
    // It stays connected, waiting for the proof it never sends, while the server sends.
    auto attacker = adapter.attack(pair.server.instance->listen_addresses());
    REQUIRE(attacker->connected());
    {
        Pump server_pump(*pair.server.instance);
        REQUIRE(attacker->send_keyed_hello(5000, holder_address));
    }
    BMI_addr_t to_holder = 0;
    REQUIRE(pair.server.instance->addr_lookup(holder_address, to_holder) == 0);
    const char text[] = "for the holder";
    auto request = unexpected_request(pair.server, to_holder, text, sizeof text, 3);
    {
        Pump holder_pump(*holder.instance);
        CHECK(post_and_wait(pair.server, request, 10000).error == 0);
    }
    const auto got = wait_unexpected(holder, 5000);
    CHECK(std::string(static_cast<const char*>(got.buffer)) == text);
    holder.instance->unexpected_free(got.buffer);
}

// A proven announced name. A key holder that listens and connects to us proves the key over
// the address it announces: that address is then its name, and a lookup of it finds the peer
// that already came in (as two servers that talk both ways expect). Without a key the same
// announcement names nothing, and the lookup makes a peer of its own.

TEST_CASE("peer rules: a peer that proved the key answers to the address it announced",
          "[rules][announced]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool keyed = GENERATE(true, false);
    INFO("method " << scheme << (keyed ? ", keyed" : ", keyless"));
    KeyFiles files;
    const std::string key = keyed ? key_option(files.key("k", 1)) : std::string();
    Side server = listening(scheme, key);
    Side client = listening(scheme, key);  // a server too: it announces its listen address
    BMI_addr_t to_server = 0;
    REQUIRE(client.instance->addr_lookup(server.instance->listen_addresses(), to_server) == 0);
    const char text[] = "from a listening client";
    auto request = unexpected_request(client, to_server, text, sizeof text, 5);
    {
        Pump server_pump(*server.instance);
        REQUIRE(post_and_wait(client, request, 10000).error == 0);
    }
    core::UnexpectedMessage got;
    {
        Pump client_pump(*client.instance);
        got = wait_unexpected(server, 10000);
    }
    CHECK(std::string(static_cast<const char*>(got.buffer)) == text);
    server.instance->unexpected_free(got.buffer);
    BMI_addr_t looked_up = 0;
    REQUIRE(server.instance->addr_lookup(client.instance->listen_addresses(), looked_up) == 0);
    if (keyed || adapter_for(scheme).endpoint_is_name)
        CHECK(looked_up == got.addr);
    else
        CHECK(looked_up != got.addr);
}

// A handshake reflected across two connections. A keyless attacker takes the
// connection a key holder dials and carries its bytes to a key holder's listener, the same
// instance's or another's: the proofs bind the endpoint each side dialled or accepted on, so
// the handshake is refused and nothing is delivered.

TEST_CASE("peer rules: a handshake carried across two connections, back to its instance or to "
          "another key holder, is refused",
          "[rules][reflection]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool to_itself = GENERATE(true, false);
    INFO("method " << scheme << (to_itself ? ", back to the instance" : ", to another holder"));
    const MethodAdapter& adapter = adapter_for(scheme);
    if (!adapter.handshake_is_bytes) {
        WARN("method " << scheme << ": its handshake passes descriptors, no relay can carry it");
        return;
    }
    KeyFiles files;
    const std::string key = key_option(files.key("k", 1));
    Pair pair = make_peers(scheme, key);
    Side holder = listening(scheme, key);
    Side& victim = pair.server;
    Side& target = to_itself ? victim : holder;
    Relay relay(scheme, target.instance->listen_addresses());
    {
        Pump holder_pump(*holder.instance);
        Pump victim_pump(*victim.instance);
        BMI_addr_t to_relay = 0;
        REQUIRE(victim.instance->addr_lookup(relay.address(), to_relay) == 0);
        const char secret[] = "for a proven peer only";
        auto request = unexpected_request(victim, to_relay, secret, sizeof secret, 3);
        const int error = post_and_wait(victim, request, 30000).error;
        if (to_itself && !adapter.reflection_reason_gap.empty()) {
            WARN("known gap, " << scheme << ": " << adapter.reflection_reason_gap);
            CHECK(error != 0);
        } else {
            CHECK(error == -BMI_EACCES);
        }
    }
    for (Side* side : {&victim, &holder}) {
        core::UnexpectedMessage got[1];
        int outcount = 0;
        REQUIRE(side->instance->testunexpected(300, outcount, got) == 0);
        CHECK(outcount == 0);
    }
}
