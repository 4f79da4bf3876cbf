// SPDX-License-Identifier: LGPL-2.1-or-later
// A burst of unexpected messages from a pair's client to its server, for the quota tests of
// every method (tests/conformance/quota_test.cpp, tests/unit/methods/verbs).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace bmi::test {

// Posts `count` unexpected messages of `size` bytes, message i with tag tag_base + i and
// pattern seed_base + i. `out` holds the payloads, which must live until the sends complete;
// returns the ids of the sends still pending.
inline std::vector<bmi_op_id_t> post_unexpected_burst(Pair& pair, int count, bmi_size_t size,
                                                      bmi_msg_tag_t tag_base,
                                                      std::uint32_t seed_base,
                                                      std::vector<std::vector<char>>& out) {
    out.assign(static_cast<std::size_t>(count), std::vector<char>(static_cast<std::size_t>(size)));
    std::vector<bmi_op_id_t> pending;
    for (int i = 0; i < count; ++i) {
        auto& payload = out[static_cast<std::size_t>(i)];
        fill_pattern(payload.data(), payload.size(), seed_base + static_cast<std::uint32_t>(i));
        auto request =
            unexpected_request(pair.client, pair.server_addr, payload.data(), size, tag_base + i);
        bmi_op_id_t id = 0;
        const int rc = pair.client.instance->post(request, id, nullptr);
        REQUIRE(rc >= 0);
        if (rc == 0) pending.push_back(id);
    }
    return pending;
}

}  // namespace bmi::test
