// SPDX-License-Identifier: LGPL-2.1-or-later
// Address lists (OrangeFS's multi-method Alias, "tcp://h:p,shm://name"): a server listens on
// every part, and a client's lookup of the whole list uses the best part it can reach. Real
// instances over loopback and shared memory.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "harness.hpp"
#include "methods/method_table.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

bool compiled(std::string_view scheme) {
    for (const auto& d : method::compiled_methods())
        if (d.scheme == scheme) return true;
    return false;
}

// A server listening on tcp and shm at once, as an OrangeFS server with such an Alias does;
// nothing where either method is not compiled.
std::optional<Side> list_server() {
    if (!compiled("tcp") || !compiled("shm")) {
        WARN("needs the tcp and shm methods");
        return std::nullopt;
    }
    Side server;
    core::InitParams params;
    params.listen = test_listen_address("tcp") + "," + test_listen_address("shm");
    params.method_list = "bmi_tcp,bmi_shm";
    params.flags = BMI_INIT_SERVER;
    REQUIRE(core::Instance::create(params, server.instance) == 0);
    REQUIRE(server.instance->open_context(server.context) == 0);
    return server;
}

Side client_of(const std::string& methods) {
    Side client;
    core::InitParams params;
    params.method_list = methods;
    REQUIRE(core::Instance::create(params, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    return client;
}

std::string scheme_of(const char* address) {
    REQUIRE(address != nullptr);
    const std::string text(address);
    return text.substr(0, text.find("://"));
}

// Sends one unexpected message to `to`, waits until the server has it, and says over which
// method it came (the scheme of the sender's address on the server).
std::string deliver(Side& client, BMI_addr_t to, Side& server) {
    Pump pump(*server.instance);  // a tcp connection needs the server's side of the handshake
    const char text[] = "over the list";
    auto request = unexpected_request(client, to, text, sizeof text, 3);
    REQUIRE(post_and_wait(client, request).error == 0);
    core::UnexpectedMessage got = wait_unexpected(server);
    CHECK(got.size == sizeof text);
    server.instance->unexpected_free(got.buffer);
    return scheme_of(server.instance->rev_lookup(got.addr));
}

}  // namespace

TEST_CASE("address list: a client on the server's node takes shm from the list", "[address-list]") {
    std::optional<Side> made = list_server();
    if (!made) return;
    Side& server = *made;
    const std::string list = server.instance->listen_addresses();
    REQUIRE(list.find(',') != std::string::npos);
    Side client = client_of("");
    BMI_addr_t addr = 0;
    REQUIRE(client.instance->addr_lookup(list, addr) == 0);
    // Answered as looked up, as OrangeFS's BMI does (OrangeFS matches it to its Alias lines).
    CHECK(std::string(client.instance->rev_lookup(addr)) == list);
    CHECK(deliver(client, addr, server) == "shm");
    // The same list again is the same peer.
    BMI_addr_t again = 0;
    REQUIRE(client.instance->addr_lookup(list, again) == 0);
    CHECK(again == addr);
}

TEST_CASE("address list: a client without shm, or told of another node, takes tcp",
          "[address-list]") {
    std::optional<Side> made = list_server();
    if (!made) return;
    Side& server = *made;
    const std::string list = server.instance->listen_addresses();
    Side tcp_only = client_of("bmi_tcp");
    BMI_addr_t addr = 0;
    REQUIRE(tcp_only.instance->addr_lookup(list, addr) == 0);
    CHECK(deliver(tcp_only, addr, server) == "tcp");

    // The server's shm name beside a tcp address of another node (TEST-NET-1: never this
    // one): the name may be another server there, so tcp is used (nothing is sent).
    const std::string shm_part = list.substr(list.find("shm://"));
    Side client = client_of("");
    BMI_addr_t elsewhere = 0;
    REQUIRE(client.instance->addr_lookup("tcp://192.0.2.1:3334," + shm_part, elsewhere) == 0);
    CHECK(std::string(client.instance->rev_lookup_unexpected(elsewhere)) == "192.0.2.1");
    CHECK(client.instance->addr_lookup("tcp://127.0.0.1:1,nonsense", elsewhere) == -BMI_EINVAL);
    CHECK(client.instance->addr_lookup("gm://x,mx://y", elsewhere) == -BMI_ENOPROTOOPT);
}

// With two methods the test loop leaves the look at the descriptors out before most spins
// (doc/architecture.md, "Progress"): a tcp request must still be served while shm traffic keeps
// every spin successful, within a bounded number of passes.
TEST_CASE("address list: a tcp request is served while shm messages keep the server spinning",
          "[address-list]") {
    std::optional<Side> made = list_server();
    if (!made) return;
    Side& server = *made;
    const std::string list = server.instance->listen_addresses();
    const std::string tcp_part = list.substr(0, list.find(','));
    const std::string shm_part = list.substr(list.find("shm://"));

    Side shm_client = client_of("bmi_shm");
    BMI_addr_t server_over_shm = 0;
    REQUIRE(shm_client.instance->addr_lookup(shm_part, server_over_shm) == 0);
    BMI_addr_t shm_peer = 0;
    {
        Pump pump(*shm_client.instance);
        const char hello[] = "ping-pong";
        auto request = unexpected_request(shm_client, server_over_shm, hello, sizeof hello, 1);
        REQUIRE(post_and_wait(shm_client, request).error == 0);
        core::UnexpectedMessage got = wait_unexpected(server);
        shm_peer = got.addr;
        server.instance->unexpected_free(got.buffer);
    }

    // The shm client answers every message at once, until told to stop (no Catch2 macros
    // off the main thread).
    std::atomic<bool> stop{false};
    std::atomic<long> rounds{0};
    std::atomic<int> echo_errors{0};
    const auto complete = [&stop](Side& side, const core::PostRequest& request) {
        bmi_op_id_t id = 0;
        const int rc = side.instance->post(request, id, nullptr);
        if (rc != 0) return rc == 1;
        for (int outcount = 0;;) {
            if (stop.load()) (void)side.instance->cancel(id, side.context);
            core::Completion done;
            if (side.instance->test(id, side.context, 10, outcount, done) != 0) return false;
            if (outcount == 1) return done.error == 0;
        }
    };
    std::thread echo([&] {
        char byte = 0;
        while (!stop.load())
            if (!complete(shm_client, recv_request(shm_client, server_over_shm, &byte, 1, 7)) ||
                !complete(shm_client, send_request(shm_client, server_over_shm, &byte, 1, 7))) {
                if (!stop.load()) ++echo_errors;
                return;
            }
    });
    // The tcp client sends once the ping-pong runs.
    Side tcp_client = client_of("bmi_tcp");
    BMI_addr_t server_over_tcp = 0;
    REQUIRE(tcp_client.instance->addr_lookup(tcp_part, server_over_tcp) == 0);
    std::atomic<bool> tcp_sent{false};
    std::thread tcp_sender([&] {
        while (rounds.load() < 200 && !stop.load()) std::this_thread::yield();
        const char text[] = "over tcp";
        auto request = unexpected_request(tcp_client, server_over_tcp, text, sizeof text, 2);
        tcp_sent.store(complete(tcp_client, request));
    });

    // A failed REQUIRE below unwinds through here: the threads must end before their objects.
    struct StopAndJoin {
        std::atomic<bool>& stop;
        std::thread& first;
        std::thread& second;
        ~StopAndJoin() {
            stop.store(true);
            if (first.joinable()) first.join();
            if (second.joinable()) second.join();
        }
    } join_at_exit{stop, echo, tcp_sender};

    // The server: one message out and back at a time, waiting in testcontext, which also
    // returns once for each unexpected message that arrives.
    bool tcp_request = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    char byte = 1;
    while (!tcp_request && std::chrono::steady_clock::now() < deadline) {
        bmi_op_id_t id = 0;
        bmi_size_t actual = 0;
        REQUIRE(server.instance->post(send_request(server, shm_peer, &byte, 1, 7), id, &actual) >=
                0);
        if (id != 0) wait_op(server, id);
        REQUIRE(server.instance->post(recv_request(server, shm_peer, &byte, 1, 7), id, &actual) >=
                0);
        for (int outcount = 0; id != 0 && outcount == 0;) {
            if (std::chrono::steady_clock::now() >= deadline) FAIL("the shm round trip stalled");
            core::Completion done[1];
            REQUIRE(server.instance->testcontext(server.context, 100, outcount, done) == 0);
            core::UnexpectedMessage got[1];
            int arrived = 0;
            if (outcount == 0 &&
                server.instance->testunexpected(0, arrived, got, std::nullopt) == 0 &&
                arrived == 1) {
                CHECK(std::string(static_cast<const char*>(got[0].buffer)) == "over tcp");
                server.instance->unexpected_free(got[0].buffer);
                tcp_request = true;
            }
        }
        rounds.fetch_add(1);
    }
    stop.store(true);
    tcp_sender.join();
    echo.join();
    CHECK(echo_errors.load() == 0);
    CHECK(tcp_request);
    CHECK(tcp_sent.load());
    CHECK(rounds.load() >= 200);
}
