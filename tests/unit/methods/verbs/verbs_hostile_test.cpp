// SPDX-License-Identifier: LGPL-2.1-or-later
// A hostile verbs peer (RawPeer: a real queue pair, hand-written messages) against a server
// that also serves a legitimate client. Each attack must close the attacker's connection only,
// and the legitimate client must then be served byte for byte.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include "harness.hpp"
#include "verbs_raw_peer.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;
using method::verbs::FinStatus;
using method::verbs::MsgHeader;
using method::verbs::MsgType;
using method::verbs::RemoteSegment;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

MsgHeader header(MsgType type) {
    MsgHeader h;
    h.type = static_cast<std::uint8_t>(type);
    return h;
}

// The legitimate client sends the server a rendezvous-sized message and it arrives intact.
void served_after_attack(Pair& pair, BMI_addr_t client_addr, int seed) {
    constexpr bmi_size_t size = 64 * 1024;
    std::vector<char> out(size), in(size);
    fill_pattern(out.data(), out.size(), seed);
    Pump server_pump(*pair.server.instance);  // it READs while the client waits for FIN
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in.data(), size, 3),
                                       rid, nullptr) == 0);
    REQUIRE(post_and_wait(pair.client, send_request(pair.client, pair.server_addr, out.data(),
                                                    size, 3),
                          30000)
                .error == 0);
    REQUIRE(wait_op(pair.server, rid, 30000).error == 0);
    REQUIRE(check_pattern(in.data(), in.size(), seed));
}
}  // namespace

TEST_CASE("verbs: a FIN for another connection's transfer does not complete it", "[verbs]") {
    Pair pair = make_peers("verbs");
    BMI_addr_t client_addr = introduce(pair);
    // The server offers the client a large message the client has not asked for yet.
    constexpr bmi_size_t big = 256 * 1024;
    std::vector<char> out(big), in(big);
    fill_pattern(out.data(), out.size(), 17);
    bmi_op_id_t sid = 0;
    REQUIRE(pair.server.instance->post(send_request(pair.server, client_addr, out.data(), big, 4),
                                       sid, nullptr) == 0);
    {
        Pump server_pump(*pair.server.instance);
        verbs::RawPeer hostile;
        REQUIRE(hostile.handshake(pair.server.instance->listen_addresses()));
        // Cookies count up from 1: claim the first few are done.
        for (std::uint64_t cookie = 1; cookie <= 4; ++cookie) {
            MsgHeader fin = header(MsgType::fin);
            fin.cookie = cookie;
            fin.status = static_cast<std::uint32_t>(FinStatus::ok);
            REQUIRE(hostile.send_message(fin));
        }
        REQUIRE(hostile.closed_by_server(30000));
    }
    int outcount = 0;
    core::Completion early;
    REQUIRE(pair.server.instance->test(sid, pair.server.context, 0, outcount, early) == 0);
    REQUIRE(outcount == 0);  // still waiting for the real receiver
    bmi_op_id_t rid = 0;
    REQUIRE(pair.client.instance->post(recv_request(pair.client, pair.server_addr, in.data(), big,
                                                    4),
                                       rid, nullptr) == 0);
    Pump client_pump(*pair.client.instance);
    REQUIRE(wait_op(pair.server, sid, 30000).error == 0);
    REQUIRE(wait_op(pair.client, rid, 30000).error == 0);
    REQUIRE(check_pattern(in.data(), in.size(), 17));
}

TEST_CASE("verbs: credits and lengths a peer sends are checked", "[verbs]") {
    // Room for two 8 KiB unexpected messages: the rest park and return no credit.
    Pair pair = make_peers("verbs", "unexpected_quota=16384");
    BMI_addr_t client_addr = introduce(pair);
    {
        Pump server_pump(*pair.server.instance);
        verbs::RawPeer hostile;
        REQUIRE(hostile.handshake(pair.server.instance->listen_addresses()));
        SECTION("sending past the granted credits") {
            std::vector<char> body(8192, 'x');
            for (int i = 0; i < 17; ++i) {  // the server granted 16
                MsgHeader h = header(MsgType::unexpected);
                h.size = body.size();
                h.tag = 40 + i;
                REQUIRE(hostile.send_message(h, body.data(), body.size()));
            }
        }
        SECTION("returning credits that were never granted") {
            MsgHeader h = header(MsgType::credit);
            h.credits = 0xffff;
            REQUIRE(hostile.send_message(h));
        }
        SECTION("an RTS whose lengths wrap") {
            const std::uint64_t half = std::uint64_t{1} << 63;
            RemoteSegment segs[3] = {{0x1000, half, 1, 0}, {0x1000, half, 1, 0}, {0x1000, 4096, 1, 0}};
            MsgHeader h = header(MsgType::rts);
            h.size = 4096;
            h.cookie = 1;
            h.seg_count = 3;
            REQUIRE(hostile.send_message(h, segs, sizeof segs));
        }
        REQUIRE(hostile.closed_by_server(30000));
    }
    // Unexpected messages the attacker got in before it was closed: drop them.
    core::UnexpectedMessage got[4];
    int outcount = 0;
    do {
        REQUIRE(pair.server.instance->testunexpected(4, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) pair.server.instance->unexpected_free(got[k].buffer);
    } while (outcount > 0);
    Pump client_pump(*pair.client.instance);
    served_after_attack(pair, client_addr, 23);
}
