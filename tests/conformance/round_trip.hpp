// SPDX-License-Identifier: LGPL-2.1-or-later
// One message each way between a pair's client and server, contiguous or as lists on both
// sides, checked byte for byte: the exchange the encryption tests of every method run.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace bmi::test {

// `size` bytes client to server, then server to client (tags 40 and 41), as lists of `pieces`
// when > 1. The bytes are `payload` when given, else fill_pattern(seed + direction). The
// receiver polls on its own meanwhile, as providers that move data only then need.
inline void round_trip(Pair& pair, BMI_addr_t client_addr, bmi_size_t size, int pieces,
                       std::uint32_t seed, const std::vector<char>* payload = nullptr,
                       int deadline_ms = 60000) {
    INFO("size " << size << " pieces " << pieces);
    for (int way = 0; way < 2; ++way) {
        Side& from = way == 0 ? pair.client : pair.server;
        Side& to = way == 0 ? pair.server : pair.client;
        const BMI_addr_t to_addr = way == 0 ? pair.server_addr : client_addr;
        const BMI_addr_t from_addr = way == 0 ? client_addr : pair.server_addr;
        std::vector<char> source(static_cast<std::size_t>(size)), sink(source.size());
        if (payload != nullptr)
            source.assign(payload->begin(), payload->begin() + static_cast<std::ptrdiff_t>(size));
        else
            fill_pattern(source.data(), source.size(), seed + way);
        std::vector<const void*> send_list, recv_list;
        std::vector<bmi_size_t> sizes;
        const bmi_size_t piece = size / pieces;
        for (int i = 0; i < pieces; ++i) {
            send_list.push_back(source.data() + i * piece);
            recv_list.push_back(sink.data() + i * piece);
            sizes.push_back(i == pieces - 1 ? size - piece * (pieces - 1) : piece);
        }
        core::PostRequest recv = recv_request(to, from_addr, sink.data(), size, 40 + way);
        core::PostRequest send = send_request(from, to_addr, source.data(), size, 40 + way);
        if (pieces > 1) {
            recv.list = recv_list.data();
            recv.sizes = sizes.data();
            recv.list_count = pieces;
            send.list = send_list.data();
            send.sizes = sizes.data();
            send.list_count = pieces;
        }
        bmi_op_id_t rid = 0;
        REQUIRE(to.instance->post(recv, rid, nullptr) == 0);
        {
            Pump receiver(*to.instance);
            REQUIRE(post_and_wait(from, send, deadline_ms).error == 0);
        }
        const auto got = wait_op(to, rid, deadline_ms);
        REQUIRE(got.error == 0);
        REQUIRE(got.actual_size == size);
        REQUIRE(sink == source);
    }
}

}  // namespace bmi::test
