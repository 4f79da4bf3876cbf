// SPDX-License-Identifier: LGPL-2.1-or-later
// The rules every method applies to a peer it does not trust yet (issue 37), written once and
// run for every compiled method through its adapter (attacker.hpp): verbs in the soft-RoCE
// guest. Each rule's bound and setting per method are rows of doc/RELIABILITY.md.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../unit/key_files.hpp"
#include "attacker.hpp"
#include "both_paths.hpp"
#include "harness.hpp"
#include "key_test_steps.hpp"

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;

namespace {

// True if the server's application sees no unexpected message within `ms`, the client
// progressing meanwhile.
bool server_sees_nothing(Pair& pair, int ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) {
        core::UnexpectedMessage got[1];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(1, outcount, got) == 0);
        if (outcount != 0) {
            pair.server.instance->unexpected_free(got[0].buffer);
            return false;
        }
        int done = 0;
        core::Completion c[1];
        pair.client.instance->testcontext(pair.client.context, 10, done, c);
    }
    return true;
}

std::string joined(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    std::string out = a;
    out.append(",").append(b);
    return out;
}

}  // namespace

// Rule 1: keys. Right key (or none on either side): as usual; wrong or one-sided: refused.

TEST_CASE("peer rules: instances with the same key, or with none, talk as usual",
          "[rules][keys]") {
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
        return key_option(files.key("k" + std::to_string(which), which));
    };
    Pair pair = make_peers(scheme, options(server_key), options(client_key));
    {
        Pump pump(*pair.server.instance);
        for (int attempt = 0; attempt < 2; ++attempt) {  // a second try is refused again
            const int error = send_first(pair, 30000);
            if (client_key != 0 || !adapter.refused_send_may_complete)
                CHECK(error == -BMI_EACCES);
        }
    }
    // Nothing of the refused peer reached the application.
    CHECK(server_sees_nothing(pair, 300));
}

// Rule 2: setup deadline. An accepted connection that does not finish its handshake, keyless
// and silent or keyed without its proof, is closed at the deadline; clients are served after.

TEST_CASE("peer rules: a handshake not finished by the setup deadline is closed then",
          "[rules][deadline]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    const bool keyed = GENERATE(false, true);
    INFO("method " << scheme << (keyed ? ", keyed hello and no proof" : ", silent connection"));
    const MethodAdapter& adapter = adapter_for(scheme);
    constexpr int deadline_ms = 400;
    KeyFiles files;
    const std::string options = joined(adapter.setup_deadline_option(deadline_ms),
                                       keyed ? key_option(files.key("k", 1)) : std::string());
    Pair pair = make_peers(scheme, options);
    {
        Pump pump(*pair.server.instance);
        auto attacker = adapter.attack(pair.server.instance->listen_addresses());
        REQUIRE(attacker->connected());
        const auto start = Clock::now();
        if (keyed) REQUIRE(attacker->send_keyed_hello(5000));
        CHECK(attacker->closed_within(deadline_ms + 3000));
        CHECK(Clock::now() - start >= std::chrono::milliseconds(deadline_ms * 3 / 4));
        // A client through its handshake is not on that clock.
        CHECK(send_first(pair, 10000) == 0);
    }
}
