// SPDX-License-Identifier: LGPL-2.1-or-later
// Same-node peers (doc/architecture.md): a tcp lookup of a libbmi server on this node carries
// its messages over shm once the server's tcp side has offered it, and only then. The server
// tells which method a client came on by its reverse lookup ("shm://pid-N" or "tcp://...").
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "attacker.hpp"
#include "harness.hpp"
#include "key_test_steps.hpp"
#include "tests/captured_stderr.hpp"
#include "tests/unit/key_files.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

bool both_compiled() {
    const auto schemes = compiled_schemes();
    auto has = [&](const char* s) {
        return std::find(schemes.begin(), schemes.end(), s) != schemes.end();
    };
    return has("tcp") && has("shm");
}

Side make_side(const std::string& options, const std::string& listen = "") {
    core::InitParams params;
    params.options = options;
    params.dialect = selected_dialect();
    params.listen = listen;
    if (!listen.empty()) params.flags = BMI_INIT_SERVER;
    Side side;
    REQUIRE(core::Instance::create(params, side.instance) == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    return side;
}

// The client's unexpected message as the server got it: the error of the send, and the
// server's reverse lookup of its sender ("" if it never came: a send to a peer that refuses
// us may complete before the refusal comes back, and the message is dropped unread).
struct Delivery {
    int send_error = 0;
    std::string sender;
};

Delivery deliver(Side& client, BMI_addr_t server_addr, Side& server, int deadline_ms = 3000) {
    const char text[] = "same node";
    auto request = unexpected_request(client, server_addr, text, sizeof text, 7);
    Delivery out;
    bmi_op_id_t id = 0;
    const int rc = client.instance->post(request, id, nullptr);
    out.send_error = rc < 0 ? rc : rc == 0 ? wait_op(client, id, deadline_ms).error : 0;
    if (out.send_error != 0) return out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    core::UnexpectedMessage got[1];
    int count = 0;
    while (count == 0 && std::chrono::steady_clock::now() < deadline)
        REQUIRE(server.instance->testunexpected(10, count, got) == 0);
    if (count == 0) return out;
    REQUIRE(got[0].size == static_cast<bmi_size_t>(sizeof text));
    const char* sender = server.instance->rev_lookup(got[0].addr);
    out.sender = sender != nullptr ? sender : "";
    server.instance->unexpected_free(got[0].buffer);
    return out;
}

bool over_shm(const Delivery& d) { return d.send_error == 0 && d.sender.rfind("shm://", 0) == 0; }
bool over_tcp(const Delivery& d) { return d.send_error == 0 && d.sender.rfind("tcp://", 0) == 0; }

// A refused client: nothing it sends arrives (its sends fail with -BMI_EACCES, or complete
// into a connection the server closes unread).
bool refused(Side& client, BMI_addr_t server_addr, Side& server) {
    for (int attempt = 0; attempt < 3; ++attempt) {
        const Delivery d = deliver(client, server_addr, server, 1000);
        UNSCOPED_INFO("attempt " << attempt << ": send " << d.send_error << ", sender '" << d.sender
                                 << "'");
        if (!d.sender.empty()) return false;
    }
    return true;
}

constexpr const char* on = "same_node_shm=1";
constexpr const char* off = "same_node_shm=0";

}  // namespace

TEST_CASE("same node: a tcp lookup of a server on this node goes over shm",
          "[conformance][same_node]") {
    if (!both_compiled()) return;
    Side server = make_side(on, "tcp://127.0.0.1:0");
    const std::string listen = server.instance->listen_addresses();
    // The listener is for ticket holders: nobody's address, not listed.
    REQUIRE(listen.rfind("tcp://", 0) == 0);
    REQUIRE(listen.find("shm://") == std::string::npos);
    Pump server_pump(*server.instance);
    Side client = make_side(on);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
    // The handle keeps the name it was looked up by.
    CHECK(std::string(client.instance->rev_lookup(server_addr)) == listen);
    const Delivery first = deliver(client, server_addr, server);
    CHECK(over_shm(first));
    CHECK(server.instance->listen_addresses() == listen);

    // Expected messages both ways, large ones included, on the upgraded connection.
    Pump client_pump(*client.instance);
    BMI_addr_t client_addr = 0;
    REQUIRE(server.instance->addr_lookup(first.sender, client_addr) == 0);
    for (bmi_size_t size : {bmi_size_t{8}, bmi_size_t{1} << 20}) {
        std::vector<char> out(static_cast<std::size_t>(size)), in(out.size());
        fill_pattern(out.data(), out.size(), 3);
        bmi_op_id_t rid = 0;
        REQUIRE(server.instance->post(recv_request(server, client_addr, in.data(), size, 9), rid,
                                      nullptr) == 0);
        REQUIRE(
            post_and_wait(client, send_request(client, server_addr, out.data(), size, 9)).error ==
            0);
        REQUIRE(wait_op(server, rid).error == 0);
        CHECK(check_pattern(in.data(), in.size(), 3));
        std::fill(in.begin(), in.end(), 0);
        REQUIRE(client.instance->post(recv_request(client, server_addr, in.data(), size, 10), rid,
                                      nullptr) == 0);
        REQUIRE(
            post_and_wait(server, send_request(server, client_addr, out.data(), size, 10)).error ==
            0);
        REQUIRE(wait_op(client, rid).error == 0);
        CHECK(check_pattern(in.data(), in.size(), 3));
    }
}

TEST_CASE("same node: off on either side keeps tcp", "[conformance][same_node]") {
    if (!both_compiled()) return;
    const char* server_option = GENERATE(on, off);
    const char* client_option = GENERATE(on, off);
    if (std::strcmp(server_option, on) == 0 && std::strcmp(client_option, on) == 0) return;
    INFO("server " << server_option << ", client " << client_option);
    Side server = make_side(server_option, "tcp://127.0.0.1:0");
    Pump server_pump(*server.instance);
    Side client = make_side(client_option);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup(server.instance->listen_addresses(), server_addr) == 0);
    CHECK(over_tcp(deliver(client, server_addr, server)));
}

TEST_CASE("same node: the key decides, as on tcp", "[conformance][same_node]") {
    if (!both_compiled()) return;
    KeyFiles keys;
    const std::string key = key_option(keys.key("k", 0x5a));
    Side server = make_side(std::string(on) + "," + key, "tcp://127.0.0.1:0");
    Pump server_pump(*server.instance);
    const std::string listen = server.instance->listen_addresses();
    SECTION("a key holder is upgraded") {
        Side client = make_side(std::string(on) + "," + key);
        BMI_addr_t server_addr = 0;
        REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
        CHECK(over_shm(deliver(client, server_addr, server)));
    }
    SECTION("a client without it gets no offer, and tcp refuses it") {
        Side client = make_side(on);
        BMI_addr_t server_addr = 0;
        REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
        CHECK(std::string(client.instance->rev_lookup(server_addr)) == listen);
        CHECK(refused(client, server_addr, server));
    }
    SECTION("another key gets no offer either") {
        Side client = make_side(std::string(on) + "," + key_option(keys.key("other", 0x33)));
        BMI_addr_t server_addr = 0;
        REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
        CHECK(refused(client, server_addr, server));
    }
}

TEST_CASE("same node: the listener admits only tickets it handed out", "[conformance][same_node]") {
    if (!both_compiled()) return;
    Side server = make_side(on, "tcp://127.0.0.1:0");
    Pump server_pump(*server.instance);
    const std::string listen = server.instance->listen_addresses();
    Side client = make_side(on);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
    REQUIRE(over_shm(deliver(client, server_addr, server)));
    // The listener is up now; a process of the same user that dials it by name shows no ticket.
    const std::string port = listen.substr(listen.rfind(':') + 1);
    Side stranger = make_side(off);
    BMI_addr_t by_name = 0;
    REQUIRE(stranger.instance->addr_lookup("shm://same-node.tcp-" + port, by_name) == 0);
    CapturedStderr log;
    CHECK(refused(stranger, by_name, server));
    // The stranger's own log names the ticket, not a key (this test runs without one).
    const std::string said = log.stop();
    CHECK(said.find("a same-node listener, which admits only the tickets") != std::string::npos);
    CHECK(said.find("admits only peers with its security key") == std::string::npos);
    // The client that holds one is still served.
    CHECK(over_shm(deliver(client, server_addr, server)));
}

TEST_CASE("same node: a restarted server is asked again", "[conformance][same_node]") {
    if (!both_compiled()) return;
    auto server = std::make_unique<Side>(make_side(on, "tcp://127.0.0.1:0"));
    const std::string listen = server->instance->listen_addresses();
    auto pump = std::make_unique<Pump>(*server->instance);
    Side client = make_side(on);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
    REQUIRE(over_shm(deliver(client, server_addr, *server)));
    // The client makes progress, as an application between its calls does, and so sees the
    // old server go.
    Pump client_pump(*client.instance);
    pump.reset();
    server.reset();
    // Same port: the old ticket means nothing to the new server, so the client asks for a new
    // one when it connects again. A send may fail while the old connection is torn down.
    server = std::make_unique<Side>(make_side(on, listen));
    pump = std::make_unique<Pump>(*server->instance);
    Delivery again;
    for (int attempt = 0; attempt < 5 && again.sender.empty(); ++attempt) {
        again = deliver(client, server_addr, *server, 1000);
        UNSCOPED_INFO("attempt " << attempt << ": send " << again.send_error << ", sender '"
                                 << again.sender << "'");
    }
    CHECK(over_shm(again));
}

TEST_CASE("same node: asking a restarted server again holds up no other shm peer",
          "[conformance][same_node]") {
    if (!both_compiled()) return;
    auto server = std::make_unique<Side>(make_side(on, "tcp://127.0.0.1:0"));
    const std::string listen = server->instance->listen_addresses();
    const int port = std::stoi(listen.substr(listen.rfind(':') + 1));
    auto pump = std::make_unique<Pump>(*server->instance);
    Side other = make_side("", test_listen_address("shm"));
    Pump other_pump(*other.instance);
    Side client = make_side(on);
    BMI_addr_t server_addr = 0, other_addr = 0;
    REQUIRE(client.instance->addr_lookup(listen, server_addr) == 0);
    REQUIRE(client.instance->addr_lookup(other.instance->listen_addresses(), other_addr) == 0);
    REQUIRE(over_shm(deliver(client, server_addr, *server)));
    REQUIRE(deliver(client, other_addr, other).send_error == 0);
    Pump client_pump(*client.instance);
    pump.reset();
    server.reset();
    // The server's port now takes the client's question for a new ticket and never answers,
    // so the next connect to it asks for the question's whole deadline. Meanwhile the client's
    // messages to its other shm peer must go on: the question holds no lock they need.
    SilentListener silent("tcp", static_cast<std::uint16_t>(port));
    const char text[] = "same node";
    long long asking_ms = 0;
    int sent_meanwhile = 0;
    // A send that the client posts before it has seen the old connection go ends on that
    // connection without asking; a later one asks. How soon the client sees it go depends on
    // the machine's load, so it tries for up to 10 s.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int attempt = 0; asking_ms < 150 && std::chrono::steady_clock::now() < give_up;
         ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::atomic<int> phase{0};  // 1 while the asking post runs, 2 after it
        std::chrono::steady_clock::duration asking{};
        bmi_op_id_t asked_id = 0;
        int asked_rc = 0;
        std::thread asker([&] {
            phase.store(1);
            const auto start = std::chrono::steady_clock::now();
            asked_rc = client.instance->post(
                send_request(client, server_addr, text, sizeof text, 8), asked_id, nullptr);
            asking = std::chrono::steady_clock::now() - start;
            phase.store(2);
        });
        while (phase.load() == 0) std::this_thread::yield();
        sent_meanwhile = 0;
        while (phase.load() == 1) {
            auto request = unexpected_request(client, other_addr, text, sizeof text, 9);
            const bool ok = post_and_wait(client, request, 5000).error == 0;
            if (ok && phase.load() == 1) ++sent_meanwhile;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        asker.join();
        asking_ms = std::chrono::duration_cast<std::chrono::milliseconds>(asking).count();
        UNSCOPED_INFO("attempt " << attempt << ": the asking post took " << asking_ms
                                 << " ms; sends to the other peer meanwhile: " << sent_meanwhile);
        // The send ends and does not hang; one that asked fails (the old listener is gone).
        if (asked_rc == 0 && asked_id != 0) {
            const int error = wait_op(client, asked_id, 5000).error;
            if (asking_ms >= 150) CHECK(error != 0);
        }
    }
    // It did ask (the question waits up to 250 ms), and the other peer was served throughout.
    REQUIRE(asking_ms >= 150);
    CHECK(sent_meanwhile >= 5);
}

TEST_CASE("same node: another user stays on tcp", "[conformance][same_node]") {
    if (!both_compiled() || geteuid() != 0) return;  // needs a second user
    Side server = make_side(on, "tcp://127.0.0.1:0");
    Pump server_pump(*server.instance);
    const std::string listen = server.instance->listen_addresses();
    // The child stays until the server has read who sent: once it is gone the server drops
    // its address, and the reverse lookup would find nothing.
    int stay[2] = {-1, -1};
    REQUIRE(pipe(stay) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(stay[1]);
        // nobody: its abstract names are not ours, and the listener's credential check says no.
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
        core::InitParams params;
        params.options = on;
        params.dialect = selected_dialect();
        std::unique_ptr<core::Instance> instance;
        bmi_context_id context = -1;
        BMI_addr_t addr = 0;
        if (core::Instance::create(params, instance) != 0 || instance->open_context(context) != 0 ||
            instance->addr_lookup(listen, addr) != 0)
            _exit(3);
        const char text[] = "same node";
        core::PostRequest request;
        request.kind = method::OpKind::send_unexpected;
        request.addr = addr;
        request.buffer = const_cast<char*>(text);
        request.size = sizeof text;
        request.tag = 7;
        request.context = context;
        bmi_op_id_t id = 0;
        int rc = instance->post(request, id, nullptr);
        for (int i = 0; rc == 0 && i < 100; ++i) {
            int count = 0;
            core::Completion done;
            if (instance->test(id, context, 50, count, done) != 0) _exit(4);
            if (count == 1) rc = done.error == 0 ? 1 : done.error;
        }
        pollfd until_told{stay[0], POLLIN, 0};
        poll(&until_told, 1, 10000);
        _exit(rc == 1 ? 0 : 5);
    }
    close(stay[0]);
    core::UnexpectedMessage got = wait_unexpected(server, 5000);
    const char* said_by = server.instance->rev_lookup(got.addr);
    const std::string sender = said_by != nullptr ? said_by : "";
    server.instance->unexpected_free(got.buffer);
    close(stay[1]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(sender.rfind("tcp://", 0) == 0);
}
