// SPDX-License-Identifier: LGPL-2.1-or-later
// One check the peer rules and the method tests share: an eager and a rendezvous message from
// client to server arrive intact.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "harness.hpp"

namespace bmi::test {

inline void both_paths_work(Pair& pair, std::uint32_t seed = 7) {
    Pump server_pump(*pair.server.instance);
    const BMI_addr_t client = introduce(pair);
    for (bmi_size_t size : {bmi_size_t(100), bmi_size_t(200000)}) {
        INFO("message of " << size << " bytes");
        std::vector<char> out(static_cast<std::size_t>(size)), in(out.size());
        fill_pattern(out.data(), out.size(), seed);
        bmi_op_id_t rid = 0;
        REQUIRE(pair.server.instance->post(recv_request(pair.server, client, in.data(), size, 4),
                                           rid, nullptr) == 0);
        CHECK(post_and_wait(pair.client,
                            send_request(pair.client, pair.server_addr, out.data(), size, 4), 30000)
                  .error == 0);
        CHECK(wait_op(pair.server, rid, 30000).error == 0);
        CHECK(check_pattern(in.data(), in.size(), seed));
    }
}

}  // namespace bmi::test
