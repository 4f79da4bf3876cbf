// SPDX-License-Identifier: LGPL-2.1-or-later
// An ofi peer's numbered messages are taken in the order of their numbers, not the order they
// complete in (rxm may complete a message it moves by its own protocol after later small ones;
// doc/methods/ofi.md, "Order"). A raw endpoint that numbers its messages sends them out of
// turn: early ones wait for the one before them, a number already taken is dropped, and a peer
// whose awaited message never comes, or that sends a number twice, is taken as gone with what
// waited.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "attacker.hpp"
#include "harness.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_handshake.hpp"
#include "methods/ofi/ofi_method.hpp"
#include "ofi_raw_endpoint.hpp"

using namespace bmi;
using namespace bmi::test;
using method::ofi::Kind;

namespace {

// The texts of the unexpected messages that reach the server within `ms`, in order.
std::vector<std::string> texts_within(Side& server, int ms) {
    std::vector<std::string> texts;
    for (auto& entry : unexpected_within(server, ms)) texts.push_back(std::move(entry.second));
    return texts;
}

// The texts of the first `count` unexpected messages to reach the server, waiting up to 10 s.
std::vector<std::string> first_texts(Side& server, std::size_t count) {
    std::vector<std::string> texts;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (texts.size() < count && std::chrono::steady_clock::now() < until)
        for (auto& entry : unexpected_within(server, 10)) texts.push_back(std::move(entry.second));
    return texts;
}

// The receive buffers the server posted in place of those its peers' messages wait in.
std::uint64_t spares(Side& server) {
    return adapter_for("ofi").spare_buffers(*server.instance).value();
}

// Waits up to 10 s for the server's spare buffers to number `want`.
bool spares_become(Side& server, std::uint64_t want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (spares(server) != want && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return spares(server) == want;
}

// A keyless hello that says its sender numbers its messages, answered; the answer says the
// server numbers its own.
void say_numbered_hello(OfiRawEndpoint& endpoint) {
    REQUIRE(endpoint.usable());
    method::ofi::Hello hello;
    hello.name = endpoint.fabric().name();
    hello.numbers = true;
    REQUIRE(endpoint.send(Kind::hello, method::ofi::encode(hello)));
    const auto body = endpoint.await(Kind::answer, 10000);
    REQUIRE(body);
    const auto answer = method::ofi::decode_answer(*body);
    REQUIRE(answer);
    CHECK(answer->numbers);
}

// An unexpected message numbered `number`, sent to its end.
void send_numbered(OfiRawEndpoint& endpoint, std::uint8_t number, const std::string& text) {
    const auto* data = reinterpret_cast<const std::byte*>(text.data());
    const std::uint64_t goal = endpoint.sends_done() + 1;
    REQUIRE(endpoint.send_tagged(
        method::ofi::with_number(method::ofi::control_tag(Kind::unexpected, 7), number),
        std::vector<std::byte>(data, data + text.size())));
    REQUIRE(endpoint.sends_end(goal));
}

}  // namespace

TEST_CASE("ofi: a peer's messages are taken in the order of their numbers",
          "[conformance][ofi][order]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi");
    const std::string listen = pair.server.instance->listen_addresses();
    Pump server(*pair.server.instance);  // rxm connects the raw endpoint only while it progresses
    OfiRawEndpoint endpoint(listen);
    say_numbered_hello(endpoint);
    // 1 and 2 complete before 0: they wait for it, each in its buffer with a spare posted.
    const std::uint64_t before = spares(pair.server);
    send_numbered(endpoint, 1, "second");
    send_numbered(endpoint, 2, "third");
    CHECK(spares_become(pair.server, before + 2));
    CHECK(texts_within(pair.server, 100).empty());
    send_numbered(endpoint, 0, "first");
    CHECK(first_texts(pair.server, 3) == std::vector<std::string>{"first", "second", "third"});
    CHECK(spares_become(pair.server, before));
    // A number already taken is no message of a peer of ours: dropped, and the next one
    // still comes (first: "again" would have come before it).
    send_numbered(endpoint, 1, "again");
    send_numbered(endpoint, 3, "fourth");
    CHECK(first_texts(pair.server, 1) == std::vector<std::string>{"fourth"});
}

TEST_CASE("ofi: a peer whose awaited message never comes, or that numbers two alike, is gone",
          "[conformance][ofi][order]") {
    if (!scheme_compiled("ofi")) return;
    const bool twice = GENERATE(false, true);
    INFO((twice ? "the same number twice" : "the message the others wait behind never comes"));
    Pair pair = make_peers("ofi", "ofi_stall_timeout_ms=300");
    const BMI_addr_t client = introduce(pair);
    const std::string listen = pair.server.instance->listen_addresses();
    Pump server(*pair.server.instance);
    {
        OfiRawEndpoint endpoint(listen);
        say_numbered_hello(endpoint);
        const std::uint64_t before = spares(pair.server);
        send_numbered(endpoint, 1, "early");
        if (twice) send_numbered(endpoint, 1, "early again");
        // Gone with what waited: at once for a number twice, past the stall deadline (300 ms,
        // looked at every 300 / 8 ms once due) for a message that never comes. So the one it
        // waited for is no one's now either.
        if (!twice) CHECK(spares_become(pair.server, before + 1));
        CHECK(spares_become(pair.server, before));
        send_numbered(endpoint, 0, "too late");
        CHECK(texts_within(pair.server, 300).empty());
    }
    // The client is served throughout.
    const std::string text = "the client";
    core::PostRequest note = unexpected_request(pair.client, pair.server_addr, text.data(),
                                                static_cast<bmi_size_t>(text.size()), 7);
    REQUIRE(post_and_wait(pair.client, note, 10000).error == 0);
    const core::UnexpectedMessage message = wait_unexpected(pair.server);
    CHECK(message.addr == client);
    pair.server.instance->unexpected_free(message.buffer);
}

#endif
