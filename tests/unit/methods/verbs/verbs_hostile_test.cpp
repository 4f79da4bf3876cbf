// SPDX-License-Identifier: LGPL-2.1-or-later
// A hostile verbs peer (RawPeer: a real queue pair, hand-written messages) against a server
// that also serves a legitimate client. Each attack must close the attacker's connection only,
// and the legitimate client must then be served byte for byte.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "full_table.hpp"
#include "harness.hpp"
#include "methods/kit/acceptor.hpp"
#include "verbs_raw_peer.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;
using method::verbs::FinStatus;
using method::verbs::Hello;
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
    REQUIRE(post_and_wait(pair.client,
                          send_request(pair.client, pair.server_addr, out.data(), size, 3), 30000)
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
    REQUIRE(pair.client.instance->post(
                recv_request(pair.client, pair.server_addr, in.data(), big, 4), rid, nullptr) == 0);
    Pump client_pump(*pair.client.instance);
    REQUIRE(wait_op(pair.server, sid, 30000).error == 0);
    REQUIRE(wait_op(pair.client, rid, 30000).error == 0);
    REQUIRE(check_pattern(in.data(), in.size(), 17));
}

TEST_CASE("verbs: credits and lengths a peer sends are checked", "[verbs]") {
    // Room for one 8 KiB unexpected message (it costs 8 KiB + 256 for its record): the rest
    // park and return no credit.
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
            RemoteSegment segs[3] = {
                {0x1000, half, 1, 0}, {0x1000, half, 1, 0}, {0x1000, 4096, 1, 0}};
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

namespace {
std::uint64_t tracked_peers(Side& side, BMI_addr_t any) {
    method::verbs::Stats stats;
    REQUIRE(side.instance->get_info(any, method::verbs::get_stats_option, &stats) == 0);
    return stats.peers;
}
}  // namespace

TEST_CASE("verbs: a handshake whose queue pair never speaks is closed at the deadline and "
          "leaves no peer",
          "[verbs]") {
    Pair pair = make_peers("verbs", "verbs_setup_timeout_ms=500");
    BMI_addr_t client_addr = introduce(pair);
    const std::uint64_t peers_before = tracked_peers(pair.server, client_addr);
    {
        Pump server_pump(*pair.server.instance);
        // A HELLO naming a queue pair that does not exist, and the ready byte: all an attacker
        // without RDMA hardware can send.
        verbs::RawPeer fake;
        REQUIRE(fake.usable());
        REQUIRE(fake.dial(pair.server.instance->listen_addresses()));
        Hello bogus = fake.own_hello();
        bogus.qp_num ^= 0x5a5a5;
        REQUIRE(fake.send_bytes(&bogus, sizeof bogus));
        Hello answer;
        REQUIRE(fake.read_hello(answer));
        REQUIRE(fake.send_bytes(&method::verbs::ready_byte, 1));
        REQUIRE(fake.closed_by_server(20000));
    }
    REQUIRE(tracked_peers(pair.server, client_addr) == peers_before);
    Pump client_pump(*pair.client.instance);
    served_after_attack(pair, client_addr, 29);
}

TEST_CASE("verbs: one source address holds only a few unfinished handshakes", "[verbs]") {
    const char* guest_ip = std::getenv("RXE_VM_IP");
    if (guest_ip == nullptr) guest_ip = "127.0.0.1";
    // Listening on every address: the attacker comes from 127.0.0.1, the client from the
    // address behind the RDMA device.
    Side server;
    core::InitParams params;
    params.listen = "verbs://0.0.0.0:0";
    params.flags = BMI_INIT_SERVER;
    // A deadline far away: only the budget can close anything during the test.
    params.options = "verbs_pending_per_source=4,verbs_setup_timeout_ms=120000";
    REQUIRE(core::Instance::create(params, server.instance) == 0);
    REQUIRE(server.instance->open_context(server.context) == 0);
    const std::string listen = server.instance->listen_addresses();
    const std::string port = listen.substr(listen.rfind(':') + 1);
    Pump server_pump(*server.instance);

    std::vector<int> idle;
    for (int i = 0; i < 4; ++i) {
        idle.push_back(verbs::bootstrap_socket("verbs://127.0.0.1:" + port));
        REQUIRE(idle.back() >= 0);
    }
    // The fifth waits, holding a descriptor and nothing else, until one of the four
    // finishes or has had its time to speak: many processes of one node connecting at once
    // must not be turned away.
    const int fifth = verbs::bootstrap_socket("verbs://127.0.0.1:" + port);
    REQUIRE(fifth >= 0);
    CHECK(verbs::still_open(fifth));
    // The four still wait for their HELLO; a client from elsewhere gets in meanwhile.
    Side client;
    REQUIRE(core::Instance::create({}, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup(std::string("verbs://") + guest_ip + ":" + port,
                                         server_addr) == 0);
    char text[] = "from elsewhere";
    auto request = unexpected_request(client, server_addr, text, sizeof text, 6);
    REQUIRE(post_and_wait(client, request, 30000).error == 0);
    core::UnexpectedMessage got;
    REQUIRE(verbs::receive_unexpected(*server.instance, got) == 1);
    REQUIRE(std::string(static_cast<char*>(got.buffer)) == text);
    server.instance->unexpected_free(got.buffer);
    // Once the oldest of the four had its second to speak, the fifth takes its place: a
    // source's silent handshakes hold its later clients up for a second at most.
    std::this_thread::sleep_for(method::kit::time_to_speak + std::chrono::milliseconds(500));
    CHECK_FALSE(verbs::still_open(idle[0]));
    for (std::size_t i = 1; i < idle.size(); ++i) CHECK(verbs::still_open(idle[i]));
    CHECK(verbs::still_open(fifth));
    for (int fd : idle) close(fd);
    close(fifth);
}

TEST_CASE("verbs: the listen address a peer announces routes nothing", "[verbs]") {
    Pair pair = make_peers("verbs");
    // A second server, whose address the attacker claims before the first one looks it up.
    Side other;
    core::InitParams params;
    params.listen = "verbs://127.0.0.1:0";
    params.flags = BMI_INIT_SERVER;
    REQUIRE(core::Instance::create(params, other.instance) == 0);
    REQUIRE(other.instance->open_context(other.context) == 0);
    const std::string other_address = other.instance->listen_addresses();
    Pump server_pump(*pair.server.instance);
    Pump other_pump(*other.instance);

    verbs::RawPeer squatter;
    REQUIRE(squatter.usable());
    REQUIRE(squatter.dial(pair.server.instance->listen_addresses()));
    const Hello claim = squatter.own_hello(other_address);
    REQUIRE(squatter.send_bytes(&claim, sizeof claim));
    Hello answer;
    REQUIRE(squatter.read_hello(answer));  // the server has read the claim
    REQUIRE(squatter.go_live(answer));
    REQUIRE(squatter.send_message(header(MsgType::credit)));

    BMI_addr_t other_addr = 0;
    REQUIRE(pair.server.instance->addr_lookup(other_address, other_addr) == 0);
    char text[] = "for the real one";
    auto request = unexpected_request(pair.server, other_addr, text, sizeof text, 8);
    REQUIRE(post_and_wait(pair.server, request, 30000).error == 0);
    core::UnexpectedMessage got;
    REQUIRE(verbs::receive_unexpected(*other.instance, got) == 1);
    REQUIRE(std::string(static_cast<char*>(got.buffer)) == text);
    other.instance->unexpected_free(got.buffer);
}

TEST_CASE("verbs: a peer reads only the bytes of its own transfer, and only until its FIN",
          "[verbs]") {
    Pair pair = make_peers("verbs");
    BMI_addr_t client_addr = introduce(pair);
    {
        Pump server_pump(*pair.server.instance);
        verbs::RawPeer reader;
        REQUIRE(reader.handshake(pair.server.instance->listen_addresses()));
        MsgHeader hi = header(MsgType::unexpected);
        REQUIRE(reader.send_message(hi));
        core::UnexpectedMessage got;
        REQUIRE(verbs::receive_unexpected(*pair.server.instance, got) == 1);
        pair.server.instance->unexpected_free(got.buffer);
        const BMI_addr_t reader_addr = got.addr;

        // A pool buffer of a server: 1 MiB from BMI_memalloc, of which the reader is offered
        // 64 KiB in the middle. The rest stands for other clients' data.
        constexpr bmi_size_t region_size = 1 << 20, offset = 256 << 10, size = 64 << 10;
        auto* region = static_cast<char*>(pair.server.instance->memalloc(reader_addr, region_size));
        REQUIRE(region != nullptr);
        fill_pattern(region, region_size, 31);
        bmi_op_id_t sid = 0;
        REQUIRE(pair.server.instance->post(
                    send_request(pair.server, reader_addr, region + offset, size, 9), sid,
                    nullptr) == 0);
        MsgHeader rts;
        std::vector<std::uint8_t> body;
        REQUIRE(reader.receive(rts, body));
        REQUIRE(rts.type == static_cast<std::uint8_t>(MsgType::rts));
        REQUIRE(body.size() == sizeof(RemoteSegment));
        RemoteSegment offered;
        std::memcpy(&offered, body.data(), sizeof offered);
        REQUIRE(offered.length == static_cast<std::uint64_t>(size));

        std::vector<std::uint8_t> bytes;
        REQUIRE(reader.read(offered.addr + size - 4096, offered.rkey, 4096, bytes) ==
                IBV_WC_SUCCESS);
        REQUIRE(std::memcmp(bytes.data(), region + offset + size - 4096, 4096) == 0);
        SECTION("past the end of what was offered") {
            REQUIRE(reader.read(offered.addr + size, offered.rkey, 4096, bytes) != IBV_WC_SUCCESS);
            pair.server.instance->cancel(sid, pair.server.context);
            wait_op(pair.server, sid, 30000);
        }
        SECTION("before the start of what was offered") {
            REQUIRE(reader.read(offered.addr - 4096, offered.rkey, 4096, bytes) != IBV_WC_SUCCESS);
            pair.server.instance->cancel(sid, pair.server.context);
            wait_op(pair.server, sid, 30000);
        }
        SECTION("after its FIN") {
            MsgHeader fin = header(MsgType::fin);
            fin.cookie = rts.cookie;
            REQUIRE(reader.send_message(fin));
            REQUIRE(wait_op(pair.server, sid, 30000).error == 0);
            REQUIRE(reader.read(offered.addr, offered.rkey, 4096, bytes) != IBV_WC_SUCCESS);
        }
        REQUIRE(pair.server.instance->memfree(reader_addr, region) == 0);
    }
    Pump client_pump(*pair.client.instance);
    served_after_attack(pair, client_addr, 37);
}

TEST_CASE("verbs: out of descriptors, the bootstrap listener sheds a new connection and keeps "
          "serving",
          "[verbs]") {
    Pair pair = make_peers("verbs");
    BMI_addr_t client_addr = introduce(pair);
    // Queued in the listener's backlog before the table fills; the listener meets it only
    // once it progresses, when it cannot accept it. Left there, it would be reported again
    // at once and spin progress, and the newcomer would wait for a HELLO until its deadline.
    const int newcomer = verbs::bootstrap_socket(pair.server.instance->listen_addresses());
    REQUIRE(newcomer >= 0);
    {
        FullTable full(0);
        Pump pump(*pair.server.instance);
        CHECK(closed_within(newcomer, 5000));
    }
    close(newcomer);
    served_after_attack(pair, client_addr, 41);
}

namespace {
constexpr std::int64_t early_budget = 64 * 1024;  // the least verbs_early_peer_bytes allows

std::uint64_t early_bytes_held(Side& side, BMI_addr_t any) {
    method::verbs::Stats stats;
    REQUIRE(side.instance->get_info(any, method::verbs::get_stats_option, &stats) == 0);
    return stats.early_bytes;
}

// The most the server held early while it progressed alone for `seconds`.
std::uint64_t most_held_over(Side& server, BMI_addr_t any, double seconds) {
    std::uint64_t most = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
        most = std::max(most, early_bytes_held(server, any));
        usleep(2000);
    }
    return most;
}
}  // namespace

TEST_CASE("verbs: what a departed peer sent early is released", "[verbs]") {
    Pair pair = make_peers("verbs", "verbs_early_peer_bytes=" + std::to_string(early_budget));
    BMI_addr_t client_addr = introduce(pair);
    Pump server_pump(*pair.server.instance);
    {
        verbs::RawPeer hostile;
        REQUIRE(hostile.handshake(pair.server.instance->listen_addresses()));
        std::vector<char> body(8192, 'e');
        for (int i = 0; i < 16; ++i) {  // its whole window: 128 KiB on a tag nobody receives
            MsgHeader h = header(MsgType::eager);
            h.size = body.size();
            h.tag = 77;
            REQUIRE(hostile.send_message(h, body.data(), body.size()));
        }
        const std::uint64_t most = most_held_over(pair.server, client_addr, 1.0);
        CHECK(most > 0);
        CHECK(most <= static_cast<std::uint64_t>(early_budget));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (early_bytes_held(pair.server, client_addr) != 0 &&
           std::chrono::steady_clock::now() < deadline)
        usleep(10000);
    CHECK(early_bytes_held(pair.server, client_addr) == 0);
    Pump client_pump(*pair.client.instance);
    served_after_attack(pair, client_addr, 31);
}
