// SPDX-License-Identifier: LGPL-2.1-or-later
// verbs transfers the conformance suite does not reach: lists longer than the device's SGE
// limit and than an RTS can describe, and unexpected messages held back by a full quota.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "unexpected_burst.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();
}

TEST_CASE("verbs: long lists are read piecewise; longer ones are packed", "[verbs]") {
    auto pieces = GENERATE(as<int>{}, 40, 100);  // an RTS describes at most 64 pieces
    INFO("send list of " << pieces << " pieces");
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    constexpr bmi_size_t piece = 4000;
    const bmi_size_t total = piece * pieces;
    std::vector<char> source(static_cast<std::size_t>(total));
    fill_pattern(source.data(), source.size(), 51);
    std::vector<const void*> send_list;
    std::vector<bmi_size_t> send_sizes;
    for (int i = 0; i < pieces; ++i) {
        send_list.push_back(source.data() + i * piece);
        send_sizes.push_back(piece);
    }
    // The receiver: 70 uneven pieces, more than any device's max_sge for one READ.
    constexpr int recv_pieces = 70;
    std::vector<char> sink(static_cast<std::size_t>(total));
    std::vector<const void*> recv_list;
    std::vector<bmi_size_t> recv_sizes;
    bmi_size_t at = 0;
    for (int i = 0; i < recv_pieces; ++i) {
        bmi_size_t n = i == recv_pieces - 1 ? total - at : total / recv_pieces + (i % 3) - 1;
        recv_list.push_back(sink.data() + at);
        recv_sizes.push_back(n);
        at += n;
    }
    core::PostRequest recv = recv_request(pair.server, client_addr, nullptr, total, 12);
    recv.list = recv_list.data();
    recv.sizes = recv_sizes.data();
    recv.list_count = recv_pieces;
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv, rid, nullptr) == 0);
    core::PostRequest send = send_request(pair.client, pair.server_addr, nullptr, total, 12);
    send.list = send_list.data();
    send.sizes = send_sizes.data();
    send.list_count = pieces;
    REQUIRE(post_and_wait(pair.client, send).error == 0);
    auto got = wait_op(pair.server, rid);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == total);
    REQUIRE(check_pattern(sink.data(), sink.size(), 51));
}

TEST_CASE("verbs: unexpected messages wait in the network while the quota is full", "[verbs]") {
    // Room for four messages that cost 8 KB each (bytes + 256 for the record); twenty are sent.
    Pair pair = make_peers("verbs", "unexpected_quota=32768");
    Pump client_pump(*pair.client.instance);
    constexpr int count = 20;
    constexpr bmi_size_t size = 8192 - 256;
    std::vector<std::vector<char>> out;
    const auto ids = post_unexpected_burst(pair, count, size, 500, 70, out);
    // Take four, keep them, and see that no more arrive while they are held.
    std::vector<core::UnexpectedMessage> held;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (held.size() < 4 && std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage got[4];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(20, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) held.push_back(got[k]);
    }
    REQUIRE(held.size() == 4);
    auto idle_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < idle_until) {
        core::UnexpectedMessage got[4];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(20, outcount, got) == 0);
        REQUIRE(outcount == 0);
    }
    // Freeing lets the rest in, in order and intact.
    int next = 0;
    auto check = [&](const core::UnexpectedMessage& m) {
        REQUIRE(m.error == 0);
        REQUIRE(m.tag == 500 + next);
        REQUIRE(m.size == size);
        REQUIRE(check_pattern(m.buffer, static_cast<std::size_t>(size), 70 + next));
        ++next;
        REQUIRE(pair.server.instance->unexpected_free(m.buffer) == 0);
    };
    for (auto& m : held) check(m);
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (next < count && std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage got[4];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(20, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) check(got[k]);
    }
    REQUIRE(next == count);
    for (auto id : ids) REQUIRE(wait_op(pair.client, id).error == 0);
}

TEST_CASE("verbs: cancel during a rendezvous leaves both sides consistent", "[verbs]") {
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    constexpr bmi_size_t big = 16 << 20;
    std::vector<char> first(static_cast<std::size_t>(big)), second(static_cast<std::size_t>(big));
    std::vector<char> in(static_cast<std::size_t>(big));
    fill_pattern(first.data(), first.size(), 81);
    fill_pattern(second.data(), second.size(), 82);

    SECTION("a cancelled RTS is never matched by a later receive") {
        bmi_op_id_t sid = 0;
        REQUIRE(pair.client.instance->post(
                    send_request(pair.client, pair.server_addr, first.data(), big, 7), sid,
                    nullptr) == 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the RTS is there
        REQUIRE(pair.client.instance->cancel(sid, pair.client.context) == 0);
        REQUIRE(wait_op(pair.client, sid).error == -BMI_ECANCEL);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // and so is the CANCEL
        bmi_op_id_t tid = 0;
        REQUIRE(pair.client.instance->post(
                    send_request(pair.client, pair.server_addr, second.data(), big, 7), tid,
                    nullptr) == 0);
        auto got = post_and_wait(pair.server,
                                 recv_request(pair.server, client_addr, in.data(), big, 7), 30000);
        REQUIRE(got.error == 0);
        REQUIRE(check_pattern(in.data(), in.size(), 82));
        REQUIRE(wait_op(pair.client, tid, 30000).error == 0);
    }
    SECTION("a receive cancelled while reading completes once its READs are done") {
        bmi_op_id_t rid = 0, sid = 0;
        REQUIRE(pair.server.instance->post(
                    recv_request(pair.server, client_addr, in.data(), big, 8), rid, nullptr) == 0);
        REQUIRE(pair.client.instance->post(
                    send_request(pair.client, pair.server_addr, first.data(), big, 8), sid,
                    nullptr) == 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        REQUIRE(pair.server.instance->cancel(rid, pair.server.context) == 0);
        auto got = wait_op(pair.server, rid, 30000);
        REQUIRE((got.error == 0 || got.error == -BMI_ECANCEL));
        REQUIRE(wait_op(pair.client, sid, 30000).error == 0);  // its memory was read or dropped
    }
    // Either way the pair still works.
    char out[16] = "after", small[16] = {};
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, small, 16, 9), rid,
                                       nullptr) == 0);
    REQUIRE(
        post_and_wait(pair.client, send_request(pair.client, pair.server_addr, out, 16, 9)).error ==
        0);
    REQUIRE(wait_op(pair.server, rid).error == 0);
    REQUIRE(std::string(small) == "after");
}

TEST_CASE("verbs: a peer that never finishes the handshake fails the post in bounded time",
          "[verbs]") {
    // A TCP listener that never accepts: connect() succeeds, HELLO is never answered.
    int mute = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(mute >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(mute, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    REQUIRE(listen(mute, 4) == 0);
    socklen_t len = sizeof sa;
    REQUIRE(getsockname(mute, reinterpret_cast<sockaddr*>(&sa), &len) == 0);

    setenv("BMI_VERBS_SETUP_TIMEOUT_MS", "500", 1);
    std::unique_ptr<core::Instance> client;
    REQUIRE(core::Instance::create({}, client) == 0);
    Side side{std::move(client), -1};
    REQUIRE(side.instance->open_context(side.context) == 0);
    BMI_addr_t addr = 0;
    REQUIRE(side.instance->addr_lookup("verbs://127.0.0.1:" + std::to_string(ntohs(sa.sin_port)),
                                       addr) == 0);
    char data[64] = "never";
    auto start = std::chrono::steady_clock::now();
    auto got = post_and_wait(side, send_request(side, addr, data, 64, 1), 10000);
    unsetenv("BMI_VERBS_SETUP_TIMEOUT_MS");  // read when the method starts, at the lookup
    REQUIRE(got.error == -BMI_ETIMEDOUT);
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    close(mute);
}

TEST_CASE("verbs: both directions at once with few send buffers and credits", "[verbs]") {
    // 16 send buffers per side are shared by data, FINs and credit returns: every kind of
    // message has to wait for a buffer at some point, and none may be forgotten.
    Pair pair = make_peers("verbs", "verbs_send_buffers=16,verbs_credits=4");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    constexpr int count = 300;
    auto size_of = [](int i) -> bmi_size_t { return i % 10 == 9 ? 50000 : 1000; };
    std::vector<std::vector<int>> a_out(count), b_out(count), a_in(count), b_in(count);
    std::vector<bmi_op_id_t> ops_client, ops_server;
    for (int i = 0; i < count; ++i) {
        const auto k = static_cast<std::size_t>(i);
        a_out[k].assign(static_cast<std::size_t>(size_of(i)) / sizeof(int), i);
        b_out[k].assign(static_cast<std::size_t>(size_of(i)) / sizeof(int), -i);
        a_in[k].assign(50000 / sizeof(int), 0);
        b_in[k].assign(50000 / sizeof(int), 0);
    }
    auto post = [](Side& side, const core::PostRequest& r, std::vector<bmi_op_id_t>& ids) {
        bmi_op_id_t id = 0;
        int rc = side.instance->post(r, id, nullptr);
        REQUIRE(rc >= 0);
        if (rc == 0) ids.push_back(id);
    };
    for (int i = 0; i < count; ++i) {
        const auto k = static_cast<std::size_t>(i);
        post(pair.server, recv_request(pair.server, client_addr, a_in[k].data(), 50000, 3),
             ops_server);
        post(pair.client, recv_request(pair.client, pair.server_addr, b_in[k].data(), 50000, 4),
             ops_client);
    }
    for (int i = 0; i < count; ++i) {
        const auto k = static_cast<std::size_t>(i);
        post(pair.client,
             send_request(pair.client, pair.server_addr, a_out[k].data(), size_of(i), 3),
             ops_client);
        post(pair.server, send_request(pair.server, client_addr, b_out[k].data(), size_of(i), 4),
             ops_server);
    }
    for (auto id : ops_server) REQUIRE(wait_op(pair.server, id, 60000).error == 0);
    for (auto id : ops_client) REQUIRE(wait_op(pair.client, id, 60000).error == 0);
    for (int i = 0; i < count; ++i) {
        const auto k = static_cast<std::size_t>(i);
        REQUIRE(a_in[k][0] == i);
        REQUIRE(b_in[k][0] == -i);
        REQUIRE(a_in[k][static_cast<std::size_t>(size_of(i)) / sizeof(int) - 1] == i);
    }
}
