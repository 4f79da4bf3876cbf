// SPDX-License-Identifier: LGPL-2.1-or-later
// An ofi endpoint the method stopped talking to cannot speak for another peer: a keyless
// endpoint that a keyed server refused, and one that said bye, go on sending unexpected
// messages from their own endpoints, and none reaches the application, under the server's
// proven client's name or any other (doc/methods/ofi.md, "Peers the method forgets"). Over
// shm the provider names a message's source from an index the sender's command carries, and
// reported such messages as the client's once the forgotten endpoint's entry was removed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../unit/key_files.hpp"
#include "harness.hpp"
#include "methods/method_config.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_handshake.hpp"
#include "ofi_raw_endpoint.hpp"
#include "ofi_stats.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
    const auto* data = reinterpret_cast<const std::byte*>(text.data());
    return {data, data + text.size()};
}

// Three unexpected messages from `endpoint`, each sent to its end.
void send_three(OfiRawEndpoint& endpoint, const std::string& text) {
    const std::uint64_t goal = endpoint.sends_done() + 3;
    for (int i = 0; i < 3; ++i)
        REQUIRE(endpoint.send(method::ofi::Kind::unexpected, bytes_of(text), 7));
    REQUIRE(endpoint.sends_end(goal));
}

// A keyless hello from `endpoint`, answered (welcomed or refused).
void say_hello(OfiRawEndpoint& endpoint) {
    REQUIRE(endpoint.usable());
    method::ofi::Hello hello;
    hello.name = endpoint.fabric().name();
    REQUIRE(endpoint.send(method::ofi::Kind::hello, method::ofi::encode(hello)));
    REQUIRE(endpoint.await(method::ofi::Kind::answer, 10000));
}

// `count` unexpected messages from `stranger` numbered from `first`, as `client`'s would be:
// none reaches the server's application.
void check_none_delivered(OfiRawEndpoint& stranger, Side& server, BMI_addr_t client,
                          std::uint8_t first, int count) {
    for (int i = 0; i < count; ++i)
        REQUIRE(stranger.send_tagged(
            method::ofi::with_number(method::ofi::control_tag(method::ofi::Kind::unexpected, 7),
                                     static_cast<std::uint8_t>(first + i)),
            bytes_of("spoofed")));
    const auto after = unexpected_within(server, 500);
    std::string delivered;
    for (const auto& [from, text] : after)
        delivered += "'" + text + "' from " + std::to_string(from) + "; ";
    INFO("delivered: " << delivered << "the client is " << client);
    CHECK(after.empty());
}

}  // namespace

TEST_CASE("ofi: an endpoint the server stopped talking to cannot speak for another peer",
          "[conformance][ofi][source]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = "key_file=" + files.key("fs.key", 0x61);
    const bool keyed = GENERATE(true, false);
    INFO((keyed ? "a keyless endpoint refused by a keyed server"
                : "an endpoint that said bye to a keyless server"));
    Pair pair = make_peers("ofi", keyed ? key : "");
    const BMI_addr_t client = introduce(pair);
    const std::string listen = pair.server.instance->listen_addresses();
    Pump server(*pair.server.instance);
    {
        OfiRawEndpoint endpoint(listen);
        say_hello(endpoint);
        if (!keyed) {
            // Taken as a peer: its messages arrive under a name of their own.
            send_three(endpoint, "before bye");
            const auto before = unexpected_within(pair.server, 500);
            REQUIRE(before.size() == 3);
            CHECK(before.front().first != client);
            REQUIRE(endpoint.send(method::ofi::Kind::bye, {}));
        }
        // Forgotten by now: refused at once, or gone with its bye.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        send_three(endpoint, "forgotten");
        const auto after = unexpected_within(pair.server, 500);
        std::string delivered;
        for (const auto& [from, text] : after)
            delivered += "'" + text + "' from " + std::to_string(from) + "; ";
        INFO("delivered: " << delivered << "the client is " << client);
        CHECK(after.empty());
    }
    // The client still speaks as itself.
    const std::string text = "the client";
    core::PostRequest note = unexpected_request(pair.client, pair.server_addr, text.data(),
                                                static_cast<bmi_size_t>(text.size()), 7);
    REQUIRE(post_and_wait(pair.client, note, 10000).error == 0);
    const auto got = unexpected_within(pair.server, 500);
    REQUIRE(got.size() == 1);
    CHECK(got.front().first == client);
    CHECK(got.front().second == text);
    // shm: the forgotten endpoint's entry was kept while it was open; a new endpoint's hello
    // lets it go now that it has closed (a keyed server keeps the new one's, refused too).
    const char* provider = std::getenv("BMI_CONFORMANCE_OFI_PROVIDER");
    if (provider != nullptr && std::string(provider) == "shm") {
        OfiRawEndpoint next(listen);
        say_hello(next);
        const std::uint64_t kept = keyed ? 1u : 0u;
        CHECK(ofi_stats_come_to(pair.server,
                                [&](const auto& stats) { return stats.silenced == kept; }));
        CHECK(ofi_stats(pair.server).silenced == kept);
    }
}

// libfabric gives the next endpoint inserted the fi_addr of one removed before, and rxm (unless
// told FI_AV_REMOVE_CLEANUP, which libbmi sets) keeps the removed one's connection and reports
// its messages under that fi_addr: the refused endpoint spoke as the key holder (2026-12-06,
// before forgotten entries lingered and libbmi set it).
TEST_CASE("ofi: an endpoint the server forgot cannot speak as the peer that comes after it",
          "[conformance][ofi][source]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = "key_file=" + files.key("fs.key", 0x61);
    Pair pair = make_peers("ofi", key);
    const std::string listen = pair.server.instance->listen_addresses();
    OfiRawEndpoint stranger(listen);
    {
        Pump server(*pair.server.instance);
        say_hello(stranger);  // keyless: refused, and its entry lingers
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    const BMI_addr_t client = introduce(pair);  // the key holder's hello: a new entry
    Pump server(*pair.server.instance);
    // Numbered as the client's next messages would be.
    check_none_delivered(stranger, pair.server, client, 1, 3);
}

// libfabric's shm names a message's source by an index the sender's command carries: an
// endpoint the server never entered spoke as its one client (2026-12-06), keyed or not.
TEST_CASE("ofi: an endpoint that never said hello cannot speak as a peer",
          "[conformance][ofi][source]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const bool keyed = GENERATE(true, false);
    INFO((keyed ? "a keyed server" : "a keyless server"));
    Pair pair = make_peers("ofi", keyed ? "key_file=" + files.key("fs.key", 0x61) : "");
    const BMI_addr_t client = introduce(pair);
    Pump server(*pair.server.instance);
    OfiRawEndpoint stranger(pair.server.instance->listen_addresses());
    REQUIRE(stranger.usable());
    // Numbered as the client's first messages are.
    check_none_delivered(stranger, pair.server, client, 0, 4);
}

#endif
