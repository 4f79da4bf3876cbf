// SPDX-License-Identifier: LGPL-2.1-or-later
// How a verbs instance waits: alone, it sleeps in its own epoll set (the control layer's direct
// wait, Method::accept_wake_fd) and gets the events handed over; and what the device's
// asynchronous events do to the connection whose queue pair they name.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../socket_probe.hpp"
#include "bmi.h"
#include "harness.hpp"
#include "unexpected_burst.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

constexpr int rounds = 20;
// Eager, eager at the limit's size class, and rendezvous (RDMA READ).
constexpr bmi_size_t sizes[] = {8, 4096, 65536};

std::uint32_t seed_of(bmi_size_t size, int round, bool reply) {
    return static_cast<std::uint32_t>(size * 131 + round * 2 + (reply ? 1 : 0));
}

// Waits for id with blocking test calls (1 s each, which is what takes the direct wait);
// 0 and actual set, or the error.
int wait_blocking(bmi_op_id_t id, bmi_context_id context, bmi_size_t* actual = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        int outcount = 0;
        bmi_error_code_t error = 0;
        bmi_size_t size = 0;
        void* user = nullptr;
        if (int rc = BMI_test(id, &outcount, &error, &size, &user, 1000, context); rc < 0)
            return rc;
        if (outcount == 1) {
            if (actual != nullptr) *actual = size;
            return error;
        }
    }
    return -BMI_ETIMEDOUT;
}

int send_blocking(BMI_addr_t to, const void* data, bmi_size_t size, bmi_msg_tag_t tag,
                  bmi_context_id context) {
    bmi_op_id_t id = 0;
    int rc = BMI_post_send(&id, to, data, size, BMI_EXT_ALLOC, tag, nullptr, context, 0);
    if (rc < 0) return rc;
    return rc == 1 ? 0 : wait_blocking(id, context);
}

// What the instance's verbs method counted (BMI_get_info through the C API).
method::verbs::Stats stats_of(BMI_addr_t peer) {
    method::verbs::Stats stats;
    if (BMI_get_info(peer, method::verbs::get_stats_option, &stats) != 0) stats = {};
    return stats;
}

bool only_verbs_active() {
    const char* methods = nullptr;
    return BMI_get_info(0, BMI_TRANSPORT_METHODS_STRING, &methods) == 0 && methods != nullptr &&
           std::string(methods) == "bmi_verbs";
}

// The client's side of the ping-pong, in a child process with its own C API instance.
// 0 on success; any other value says which step failed.
int client_pingpong(const std::string& address) {
    if (BMI_initialize("bmi_verbs", nullptr, 0, nullptr) != 0) return 10;
    bmi_context_id context = 0;
    if (BMI_open_context(&context) != 0) return 11;
    BMI_addr_t server = 0;
    if (BMI_addr_lookup(&server, address.c_str(), nullptr) != 0) return 12;
    if (!only_verbs_active()) return 13;
    // Long after the server went to sleep for it: that wait must sleep on verbs' own set.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int hello = 1;
    bmi_op_id_t id = 0;
    int rc = BMI_post_sendunexpected(&id, server, &hello, sizeof hello, BMI_EXT_ALLOC, 1, nullptr,
                                     context, 0);
    if (rc < 0 || (rc == 0 && wait_blocking(id, context) != 0)) return 14;
    std::vector<char> out(65536), in(65536);
    for (bmi_size_t size : sizes) {
        for (int round = 0; round < rounds; ++round) {
            const bmi_msg_tag_t tag = 100 + round;
            bmi_op_id_t reply = 0;
            bmi_size_t actual = 0;
            std::memset(in.data(), 0, in.size());
            rc = BMI_post_recv(&reply, server, in.data(), size, &actual, BMI_EXT_ALLOC, tag,
                               nullptr, context, 0);
            if (rc < 0) return 20;
            fill_pattern(out.data(), static_cast<std::size_t>(size), seed_of(size, round, false));
            if (send_blocking(server, out.data(), size, tag, context) != 0) return 21;
            if (rc == 0 && wait_blocking(reply, context, &actual) != 0) return 22;
            if (actual != size) return 23;
            if (!check_pattern(in.data(), static_cast<std::size_t>(size),
                               seed_of(size, round, true)))
                return 24;
        }
    }
    // With verbs alone every sleep is on the method's own set. A reply may be caught by the
    // spin before a sleep, so not every round sleeps; across all rounds some do.
    if (stats_of(server).handed_wakeups == 0) return 30;
    BMI_close_context(context);
    return BMI_finalize() == 0 ? 0 : 31;
}
}  // namespace

TEST_CASE("verbs alone sleeps in its own epoll set: a blocking ping-pong through the C API",
          "[verbs]") {
    verbs::Child child([](const std::string& address, int) { return client_pingpong(address); });
    REQUIRE(BMI_initialize("bmi_verbs", "verbs://127.0.0.1:0", BMI_INIT_SERVER, nullptr) == 0);
    REQUIRE(only_verbs_active());
    const char* listen = nullptr;
    REQUIRE(BMI_get_info(0, BMI_GET_METH_ADDR, &listen) == 0);
    child.start(listen);
    bmi_context_id context = 0;
    REQUIRE(BMI_open_context(&context) == 0);

    BMI_unexpected_info hello{};
    int outcount = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
        REQUIRE(BMI_testunexpected(1, &outcount, &hello, 1000) == 0);
    REQUIRE(outcount == 1);
    REQUIRE(hello.error_code == 0);
    const BMI_addr_t client = hello.addr;
    BMI_unexpected_free(client, hello.buffer);
    // The wait for the child's first message slept at least once, on the method's own set.
    // Read now: once the child is gone its address may be dropped, and with it the answer.
    CHECK(stats_of(client).handed_wakeups >= 1);

    std::vector<char> in(65536), out(65536);
    for (bmi_size_t size : sizes) {
        INFO("size " << size);
        for (int round = 0; round < rounds; ++round) {
            const bmi_msg_tag_t tag = 100 + round;
            bmi_op_id_t id = 0;
            bmi_size_t actual = 0;
            int rc = BMI_post_recv(&id, client, in.data(), size, &actual, BMI_EXT_ALLOC, tag,
                                   nullptr, context, 0);
            REQUIRE(rc >= 0);
            if (rc == 0) REQUIRE(wait_blocking(id, context, &actual) == 0);
            REQUIRE(actual == size);
            REQUIRE(check_pattern(in.data(), static_cast<std::size_t>(size),
                                  seed_of(size, round, false)));
            fill_pattern(out.data(), static_cast<std::size_t>(size), seed_of(size, round, true));
            REQUIRE(send_blocking(client, out.data(), size, tag, context) == 0);
        }
    }
    REQUIRE(child.wait_exit() == 0);
    BMI_close_context(context);
    REQUIRE(BMI_finalize() == 0);
}

TEST_CASE("verbs: a queue pair event fails the connection owning that QP, and only that one",
          "[verbs]") {
    struct Case {
        ibv_event_type type;
        int error;
    };
    const auto which = GENERATE(Case{IBV_EVENT_QP_FATAL, -BMI_EIO},
                                Case{IBV_EVENT_QP_REQ_ERR, -BMI_EPROTO},
                                Case{IBV_EVENT_QP_ACCESS_ERR, -BMI_EPROTO},
                                Case{IBV_EVENT_PATH_MIG_ERR, -BMI_EHOSTUNREACH});
    INFO("event " << ibv_event_type_str(which.type));
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    const BMI_addr_t client_addr = introduce(pair);
    core::Instance& client = *pair.client.instance;

    void* qp = nullptr;
    REQUIRE(client.get_info(pair.server_addr, method::verbs::peer_qp_option, &qp) == 0);
    REQUIRE(qp != nullptr);

    // Receives on both sides that only a failure can finish.
    char client_in[16] = {}, server_in[16] = {};
    bmi_op_id_t client_recv = 0, server_recv = 0;
    REQUIRE(client.post(recv_request(pair.client, pair.server_addr, client_in, 16, 5), client_recv,
                        nullptr) == 0);
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, server_in, 16, 6),
                                       server_recv, nullptr) == 0);

    ibv_async_event event{};
    // A pointer that names no QP of ours is looked up, never followed: nothing happens.
    int not_a_qp = 0;
    event.element.qp = reinterpret_cast<ibv_qp*>(&not_a_qp);
    event.event_type = which.type;
    REQUIRE(client.set_info(pair.server_addr, method::verbs::async_event_option, &event) == 0);
    // News about our own QP changes nothing either.
    event.element.qp = static_cast<ibv_qp*>(qp);
    for (ibv_event_type benign : {IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED}) {
        event.event_type = benign;
        REQUIRE(client.set_info(pair.server_addr, method::verbs::async_event_option, &event) == 0);
    }
    int outcount = 0;
    core::Completion done;
    REQUIRE(client.test(client_recv, pair.client.context, 200, outcount, done) == 0);
    REQUIRE(outcount == 0);
    // The connection still carries messages.
    char ping[16] = "still up";
    REQUIRE(post_and_wait(pair.client,
                          send_request(pair.client, pair.server_addr, ping, sizeof ping, 6))
                .error == 0);
    REQUIRE(wait_op(pair.server, server_recv).error == 0);
    REQUIRE(std::string(server_in) == "still up");
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, server_in, 16, 7),
                                       server_recv, nullptr) == 0);

    // The event itself, on the QP carrying the client's traffic.
    event.event_type = which.type;
    REQUIRE(client.set_info(pair.server_addr, method::verbs::async_event_option, &event) == 0);
    REQUIRE(wait_op(pair.client, client_recv).error == which.error);
    // The server hears of it through the bootstrap socket.
    CHECK(wait_op(pair.server, server_recv, 30000).error != 0);
    REQUIRE(client.get_info(pair.server_addr, method::verbs::peer_qp_option, &qp) == -BMI_ENOENT);

    // A looked-up peer is reached again over a new connection.
    char again[16] = "again";
    auto request = unexpected_request(pair.client, pair.server_addr, again, sizeof again, 8);
    REQUIRE(post_and_wait(pair.client, request).error == 0);
    core::UnexpectedMessage got;
    REQUIRE(verbs::receive_unexpected(*pair.server.instance, got) == 1);
    REQUIRE(got.error == 0);
    REQUIRE(got.tag == 8);
    REQUIRE(std::string(static_cast<const char*>(got.buffer)) == "again");
    REQUIRE(pair.server.instance->unexpected_free(got.buffer) == 0);
}

TEST_CASE("verbs: every bootstrap socket carries the silent-peer bound of its settings",
          "[verbs]") {
    // The socket stays open for the connection's life; only the kernel's bound on it finds a
    // node that is gone (the device acknowledges for a live process, and the queue pair alone
    // never notices a silent one).
    Pair pair = make_peers("verbs", "verbs_silent_peer_timeout_ms=20s");
    introduce(pair);
    const std::string listen = pair.server.instance->listen_addresses();
    const auto listen_port =
        static_cast<std::uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1)));
    const int client_side = socket_with_port(listen_port, false);
    REQUIRE(client_side >= 0);
    const int server_side = socket_with_port(port_of(client_side, true), false);
    REQUIRE(server_side >= 0);
    for (int fd : {client_side, server_side}) {
        CHECK(tcp_option(fd, TCP_USER_TIMEOUT) == 20000);
        CHECK(tcp_option(fd, TCP_KEEPIDLE) == 17);
        CHECK(tcp_option(fd, TCP_KEEPCNT) == 3);
    }
}
