// SPDX-License-Identifier: LGPL-2.1-or-later
// Two ofi instances whose sizes differ (ofi_eager_bytes, ofi_chunk_bytes)
// still exchange every message whole: each sends the other nothing larger than the other's
// receives take (doc/methods/ofi.md, "Sizes the two ends agree on"). Over shm a message larger
// than the receive it matched kept libfabric 1.17's progress copying for ever.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "methods/method_config.hpp"
#include "round_trip.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_handshake.hpp"
#include "ofi_raw_endpoint.hpp"
#endif

#if BMI_METHOD_OFI

using namespace bmi;
using namespace bmi::test;

TEST_CASE("ofi: ends with different eager and chunk sizes exchange every message whole",
          "[conformance][ofi][limits]") {
    if (!scheme_compiled("ofi")) return;
    const bool server_smaller = GENERATE(true, false);
    INFO((server_smaller ? "the server's sizes are the smaller" : "the client's are"));
    const std::string small = "ofi_eager_bytes=16K,ofi_chunk_bytes=64K";
    Pair pair = server_smaller ? make_peers("ofi", small, std::string())
                               : make_peers("ofi", "", small);
    const BMI_addr_t client = introduce(pair);
    // Above the smaller eager limit, below the larger one; then chunks of either size.
    for (const bmi_size_t size : {bmi_size_t{32 * 1024}, bmi_size_t{48 * 1024 + 3},
                                  bmi_size_t{1024 * 1024}, bmi_size_t{5 * 1024 * 1024 + 1}})
        round_trip(pair, client, size, 1, static_cast<std::uint32_t>(size), nullptr, 30000);
    // A message sent before its receive is posted goes as the receiver takes it too.
    for (const bmi_size_t size : {bmi_size_t{32 * 1024}, bmi_size_t{1024 * 1024}}) {
        std::vector<char> source(static_cast<std::size_t>(size)), sink(source.size());
        fill_pattern(source.data(), source.size(), 9);
        bmi_op_id_t sid = 0;
        REQUIRE(pair.client.instance->post(
                    send_request(pair.client, pair.server_addr, source.data(), size, 50), sid,
                    nullptr) == 0);
        core::PostRequest recv = recv_request(pair.server, client, sink.data(), size, 50);
        {
            Pump sender(*pair.client.instance);
            REQUIRE(post_and_wait(pair.server, recv, 30000).error == 0);
        }
        if (sid != 0) REQUIRE(wait_op(pair.client, sid, 30000).error == 0);
        REQUIRE(sink == source);
    }
}

TEST_CASE("ofi: an announcement whose piece size is out of range is dropped",
          "[conformance][ofi][limits][rules]") {
    if (!scheme_compiled("ofi")) return;
    using namespace method::ofi;
    Pair pair = make_peers("ofi");
    introduce(pair);
    Pump server(*pair.server.instance);
    OfiRawEndpoint endpoint(pair.server.instance->listen_addresses());
    REQUIRE(endpoint.usable());
    Hello hello;
    hello.name = endpoint.fabric().name();
    REQUIRE(endpoint.send(Kind::hello, encode(hello)));
    REQUIRE(endpoint.await(Kind::answer, 10000));
    REQUIRE(endpoint.send(Kind::unexpected, {std::byte{1}}, 29));
    const core::UnexpectedMessage first = wait_unexpected(pair.server);
    const BMI_addr_t raw = first.addr;
    pair.server.instance->unexpected_free(first.buffer);
    const auto rts_body = [](std::uint32_t transfer, std::uint32_t piece) {
        const Rts rts{1024 * 1024, transfer, piece};
        const auto* bytes = reinterpret_cast<const std::byte*>(&rts);
        return std::vector<std::byte>(bytes, bytes + sizeof rts);
    };
    // A piece of one byte would have the receiver post a receive per byte of the message.
    REQUIRE(endpoint.send(Kind::rts, rts_body(1, 1), 30));
    REQUIRE(endpoint.send(Kind::rts, rts_body(2, largest_piece + 1), 30));
    REQUIRE(endpoint.send(Kind::rts, rts_body(3, smallest_piece), 30));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The receive takes the one announcement in range: the others were dropped, not kept.
    std::vector<char> into(1024 * 1024);
    bmi_op_id_t id = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, raw, into.data(),
                                                    static_cast<bmi_size_t>(into.size()), 30),
                                       id, nullptr) == 0);
    const auto cts = endpoint.await(Kind::cts, 10000);
    REQUIRE(cts);
    REQUIRE(cts->size() == sizeof(Cts));
    Cts answer{};
    std::memcpy(&answer, cts->data(), sizeof answer);
    CHECK(answer.transfer == 3);
    CHECK(answer.status == 0);
    REQUIRE(pair.server.instance->cancel(id, pair.server.context) == 0);
    CHECK(wait_op(pair.server, id).error != 0);
}

#endif
