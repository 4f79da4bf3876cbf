// SPDX-License-Identifier: LGPL-2.1-or-later
// What the shared peer rules' specifications (peer_rules*_test.cpp) have in common: a second
// listening instance, option strings, and the server's silence.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "harness.hpp"

namespace bmi::test {

// The deadline a deadline case sets (rule_bound_ms), and how long after it an operation may
// still end on a loaded machine (rule_late_ms).
constexpr int rule_bound_ms = 500;
constexpr int rule_late_ms = 3000;

// True if the server's application sees no unexpected message within `ms`, the client
// progressing meanwhile.
inline bool server_sees_nothing(Pair& pair, int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
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

// A listening instance besides a Pair's server, with these options.
inline Side listening(const std::string& scheme, const std::string& options) {
    Side side;
    core::InitParams params;
    params.listen = test_listen_address(scheme);
    params.flags = BMI_INIT_SERVER;
    params.options = options;
    params.dialect = selected_dialect();
    REQUIRE(core::Instance::create(params, side.instance) == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    return side;
}

// a and b joined by a comma, either may be empty.
inline std::string joined(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    std::string out = a;
    out.append(",").append(b);
    return out;
}

}  // namespace bmi::test
