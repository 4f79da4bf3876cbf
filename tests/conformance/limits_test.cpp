// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: two ends whose unexpected_limit differs. Each tells the other its limit when
// they meet, so an unexpected message above the receiver's limit fails at its sender with
// -BMI_EMSGSIZE instead of being reported sent and then dropped (with the connection, and the
// messages behind it) by the receiver; what is within the limit arrives.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

// Posts an unexpected message of `size` from `from` to `to` and returns its outcome: the
// post's error, or its completion's.
int send_unexpected(Side& from, BMI_addr_t to, std::vector<char>& bytes, bmi_size_t size,
                    bmi_msg_tag_t tag) {
    core::PostRequest request = unexpected_request(from, to, bytes.data(), size, tag);
    bmi_op_id_t id = 0;
    const int rc = from.instance->post(request, id, nullptr);
    if (rc != 0) return rc < 0 ? rc : 0;
    return wait_op(from, id).error;
}

// The limit `from`'s instance answers for `to` (BMI_get_info per address), once it is as small
// as `want` or the deadline passed: a method learns it from the handshake, which may still be
// under way.
int limit_once_told(Side& from, BMI_addr_t to, int want) {
    int limit = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
        REQUIRE(from.instance->get_info(to, BMI_GET_UNEXP_SIZE, &limit) == 0);
        if (limit <= want) break;
        int outcount = 0;
        core::Completion c[4];
        from.instance->testcontext(from.context, 10, outcount, c);
    } while (std::chrono::steady_clock::now() < deadline);
    return limit;
}

}  // namespace

TEST_CASE("an unexpected message above the receiver's limit fails at its sender",
          "[conformance][limits]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    const bool server_limited = GENERATE(true, false);
    INFO(scheme << (server_limited ? ": the server" : ": the client") << " takes 4 KiB");
    const std::string limited = "unexpected_limit=4K", roomy = "unexpected_limit=16K";
    Pair pair = server_limited ? make_peers(scheme, limited, roomy)
                               : make_peers(scheme, roomy, limited);
    const BMI_addr_t client_addr = introduce(pair);
    Side& sender = server_limited ? pair.client : pair.server;
    Side& receiver = server_limited ? pair.server : pair.client;
    const BMI_addr_t to = server_limited ? pair.server_addr : client_addr;

    std::vector<char> bytes(8 * 1024, 'u');
    std::vector<bmi_msg_tag_t> sent;
    {
        Pump pump(*receiver.instance);
        // Before the sender heard the limit (a tcp client's first messages go before the
        // server's answer), a message may go: then it arrives, or fails; never sent and lost.
        if (send_unexpected(sender, to, bytes, 8 * 1024, 60) == 0) sent.push_back(60);
        // Asked for this peer, the sender's instance answers the peer's limit once told.
        CHECK(limit_once_told(sender, to, 4 * 1024) == 4 * 1024);
        CHECK(send_unexpected(sender, to, bytes, 8 * 1024, 61) == -BMI_EMSGSIZE);
        // Within the receiver's limit a message goes and arrives, and so does the next.
        REQUIRE(send_unexpected(sender, to, bytes, 4 * 1024, 62) == 0);
        REQUIRE(send_unexpected(sender, to, bytes, 100, 63) == 0);
        sent.insert(sent.end(), {62, 63});
    }
    for (const bmi_msg_tag_t tag : sent) {
        const core::UnexpectedMessage got = wait_unexpected(receiver);
        CHECK(got.tag == tag);
        CHECK(got.size == (tag == 60 ? 8 * 1024 : tag == 62 ? 4 * 1024 : 100));
        receiver.instance->unexpected_free(got.buffer);
    }
}

TEST_CASE("a first unexpected message above the common limit waits for the peer's and arrives",
          "[conformance][limits]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO(scheme);
    // Both ends take 24 KiB; an end that sets none takes 16 KiB.
    Pair pair = make_peers(scheme, "unexpected_limit=24K");
    int own = 0;
    REQUIRE(pair.client.instance->get_info(0, BMI_GET_UNEXP_SIZE, &own) == 0);
    if (own < 24 * 1024) {
        // verbs caps the setting at one eager SEND (16 KiB): nothing above the common limit.
        CHECK(scheme == "verbs");
        return;
    }
    std::vector<char> bytes(24 * 1024, 'f');
    {
        Pump pump(*pair.server.instance);
        REQUIRE(send_unexpected(pair.client, pair.server_addr, bytes, 24 * 1024, 70) == 0);
    }
    const core::UnexpectedMessage got = wait_unexpected(pair.server);
    CHECK(got.tag == 70);
    CHECK(got.size == 24 * 1024);
    pair.server.instance->unexpected_free(got.buffer);
}
