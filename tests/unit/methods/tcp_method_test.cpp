// SPDX-License-Identifier: LGPL-2.1-or-later
// Two real tcp instances in one process over loopback: expected, rendezvous, unexpected, lists,
// immediate completion, cancel, IPv6 and head-of-line behaviour.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp::test;

TEST_CASE("tcp listen address reports the real port", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    const std::string addr = p.server->listen_address();
    CHECK(addr.rfind("tcp://127.0.0.1:", 0) == 0);
    CHECK(addr != "tcp://127.0.0.1:0");
    std::shared_ptr<Peer> again;
    REQUIRE(p.client->lookup(addr, again) == 0);
    CHECK(again == p.to_server);  // same canonical string, same Peer
    CHECK(p.client->describe_peer(*p.to_server) == addr);
    std::shared_ptr<Peer> bad;
    CHECK(p.client->lookup("tcp://nohostport", bad) == -BMI_EINVAL);
    CHECK(p.client->lookup("shm://x:1", bad) == -BMI_EINVAL);
}

TEST_CASE("a keyless pair ends on v2 framing after the first message", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    // connect() returns once neither side has a handshake open; a client still offering, or
    // an acceptor still waiting for HELLO, would keep it from returning.
    REQUIRE(p.connect());
    CHECK(static_cast<bmi::method::tcp::TcpMethod&>(*p.client).handshakes_open() == 0);
    // Over 16 MiB: only v2 carries it, and nothing holds it back.
    const std::size_t size = (std::size_t(16) << 20) + 4096;
    auto data = pattern(size, 5);
    std::vector<std::uint8_t> got(size);
    auto outcome = p.exchange(12, data, got);
    CHECK(outcome.send_error == 0);
    CHECK(outcome.recv_error == 0);
    CHECK(got == data);
}

TEST_CASE("tcp expected messages", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    CHECK(p.server_sink.registered_before_delivery);
    CHECK(p.to_client->addr() != 0);
    CHECK(p.server->peer_host(*p.to_client) == "127.0.0.1");
    CHECK(p.server->describe_peer(*p.to_client).rfind("tcp://127.0.0.1:", 0) == 0);

    SECTION("eager send and recv, recv posted first") {
        auto data = pattern(1000, 1);
        std::vector<std::uint8_t> in(1000);
        auto r = make_op(OpKind::recv, p.to_client, 7, in.data(), 1000);
        REQUIRE(post(*p.server, *r) == 0);
        auto s = make_op(OpKind::send, p.to_server, 7, data.data(), 1000);
        REQUIRE(post(*p.client, *s) >= 0);
        REQUIRE(p.run([&] { return r->completed && s->completed; }));
        CHECK(r->error == 0);
        CHECK(s->error == 0);
        CHECK(r->actual_size == 1000);
        CHECK(in == data);
    }
    SECTION("short message and buffered eager complete immediately") {
        auto data = pattern(10, 2);
        auto s = make_op(OpKind::send, p.to_server, 8, data.data(), 10);
        // The connection is established and idle: the direct write finishes inside post.
        CHECK(post(*p.client, *s) == 1);
        p.run([] { return false; }, 0.2);  // let the message arrive and be buffered
        std::vector<std::uint8_t> in(4096);
        auto r = make_op(OpKind::recv, p.to_client, 8, in.data(), 4096);
        CHECK(post(*p.server, *r) == 1);  // matches the buffered eager message
        CHECK(r->actual_size == 10);
        CHECK(std::memcmp(in.data(), data.data(), 10) == 0);
    }
    SECTION("messages with one tag match in order") {
        std::vector<std::unique_ptr<Operation>> sends, recvs;
        std::vector<std::vector<std::uint8_t>> out, in(5, std::vector<std::uint8_t>(64));
        for (int i = 0; i < 5; ++i) out.push_back(pattern(64, 10 + i));
        for (int i = 0; i < 5; ++i) {
            sends.push_back(make_op(OpKind::send, p.to_server, 3, out[i].data(), 64));
            post(*p.client, *sends.back());
        }
        for (int i = 0; i < 5; ++i) {
            recvs.push_back(make_op(OpKind::recv, p.to_client, 3, in[i].data(), 64));
            post(*p.server, *recvs.back());
        }
        REQUIRE(p.run([&] {
            for (auto& r : recvs)
                if (!r->completed) return false;
            return true;
        }));
        for (int i = 0; i < 5; ++i) CHECK(in[i] == out[i]);
    }
    SECTION("eager message larger than the receive is EMSGSIZE") {
        auto data = pattern(2000, 3);
        std::vector<std::uint8_t> in(100);
        auto r = make_op(OpKind::recv, p.to_client, 9, in.data(), 100);
        post(*p.server, *r);
        auto s = make_op(OpKind::send, p.to_server, 9, data.data(), 2000);
        post(*p.client, *s);
        REQUIRE(p.run([&] { return r->completed && s->completed; }));
        CHECK(r->error == -BMI_EMSGSIZE);
    }
    SECTION("large eager messages, received posted or buffered, intact") {
        // 64 KiB-512 KiB go eagerly between libbmi peers (feature_large_eager): with the
        // receive posted the payload is read straight into it, without it it is buffered.
        for (bool posted_first : {true, false}) {
            for (bmi_size_t size : {bmi_size_t(70000), bmi_size_t(512 * 1024)}) {
                auto data = pattern(std::size_t(size), std::uint32_t(size) + posted_first);
                std::vector<std::uint8_t> in(std::size_t(size) + 10);
                auto r = make_op(OpKind::recv, p.to_client, 11, in.data(), bmi_size_t(in.size()));
                if (posted_first) REQUIRE(post(*p.server, *r) == 0);
                auto s = make_op(OpKind::send, p.to_server, 11, data.data(), size);
                REQUIRE(post(*p.client, *s) >= 0);
                if (!posted_first) {
                    REQUIRE(p.run([&] { return s->completed; }));
                    p.run([] { return false; }, 0.1);  // let it arrive unmatched
                    post(*p.server, *r);
                }
                REQUIRE(p.run([&] { return r->completed && s->completed; }));
                CHECK(s->error == 0);
                CHECK(r->error == 0);
                CHECK(r->actual_size == size);
                CHECK(std::memcmp(in.data(), data.data(), std::size_t(size)) == 0);
            }
        }
    }
    SECTION("a large eager message larger than the receive fails the receive only") {
        auto data = pattern(300000, 5);
        std::vector<std::uint8_t> in(50000);
        const auto failed = p.exchange(12, data, in);
        CHECK(failed.recv_error == -BMI_EMSGSIZE);
        CHECK(failed.send_error == 0);
        // The stream stays in step: the next message arrives whole.
        auto next = pattern(100, 6);
        std::vector<std::uint8_t> in2(100);
        const auto ok = p.exchange(12, next, in2);
        CHECK(ok.recv_error == 0);
        CHECK(in2 == next);
    }
    SECTION("rendezvous larger than the receive fails both sides") {
        // Above the largest eager size (v2_large_eager_limit): RTS, then NAK.
        auto data = pattern(600000, 4);
        std::vector<std::uint8_t> in(50000);
        auto s = make_op(OpKind::send, p.to_server, 10, data.data(), 600000);
        post(*p.client, *s);
        auto r = make_op(OpKind::recv, p.to_client, 10, in.data(), 50000);
        post(*p.server, *r);
        REQUIRE(p.run([&] { return r->completed && s->completed; }));
        CHECK(r->error == -BMI_EMSGSIZE);
        CHECK(s->error == -BMI_EMSGSIZE);
    }
}

TEST_CASE("tcp rendezvous moves large messages intact", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    for (std::size_t size : {std::size_t(1) << 20, std::size_t(40) << 20}) {
        auto data = pattern(size, static_cast<std::uint32_t>(size));
        std::vector<std::uint8_t> in(size + 100);
        // Server to client: the server reuses the connection the client opened.
        auto s = make_op(OpKind::send, p.to_client, 20, data.data(), static_cast<bmi_size_t>(size));
        REQUIRE(post(*p.server, *s) == 0);
        auto r =
            make_op(OpKind::recv, p.to_server, 20, in.data(), static_cast<bmi_size_t>(in.size()));
        REQUIRE(post(*p.client, *r) == 0);
        REQUIRE(p.run([&] { return r->completed && s->completed; }, 10));
        CHECK(s->error == 0);
        CHECK(r->error == 0);
        CHECK(r->actual_size == static_cast<bmi_size_t>(size));
        CHECK(checksum(in.data(), size) == checksum(data.data(), size));
    }
}

TEST_CASE("tcp unexpected messages", "[tcp]") {
    Pair p("tcp://127.0.0.1:0", 4096);
    REQUIRE(p.create_status == 0);
    CHECK(p.server->unexpected_limit() == 4096);
    REQUIRE(p.connect());
    SECTION("over the limit is refused at post") {
        // Each side enforces its own limit when posting (the client keeps the default).
        const bmi_size_t size = p.client->unexpected_limit() + 1;
        std::vector<std::uint8_t> big(static_cast<std::size_t>(size));
        auto s = make_op(OpKind::send_unexpected, p.to_server, 1, big.data(), size);
        CHECK(p.client->post(*s) == -BMI_EMSGSIZE);
    }
    SECTION("quota full pauses the socket without spinning, then delivers") {
        p.server_sink.quota = p.server_sink.used;  // nothing more fits
        auto data = pattern(3000, 5);
        auto s = make_op(OpKind::send_unexpected, p.to_server, 2, data.data(), 3000);
        post(*p.client, *s);
        const auto before = p.server_sink.unexpected.size();
        REQUIRE(p.run([&] { return s->completed; }));
        for (int i = 0; i < 20; ++i) p.server->progress();
        CHECK(p.server_sink.unexpected.size() == before);
        pollfd pfd{p.server->wait_fd(), POLLIN, 0};
        CHECK(poll(&pfd, 1, 0) == 0);  // not readable while it cannot make headway
        int waiting = 0;
        CHECK(p.server->get_info(nullptr, BMI_TCP_CHECK_UNEXPECTED, &waiting) == 0);
        CHECK(waiting == 1);
        p.server_sink.quota = 1 << 20;
        REQUIRE(p.run([&] { return p.server_sink.unexpected.size() > before; }));
        const auto& u = p.server_sink.unexpected.back();
        CHECK(u.size == 3000);
        CHECK(u.tag == 2);
        CHECK(std::memcmp(u.buffer, data.data(), 3000) == 0);
        CHECK(u.peer == p.to_client);
    }
    SECTION("the server replies to the peer it learned") {
        auto data = pattern(500, 6);
        std::vector<std::uint8_t> in(500);
        auto r = make_op(OpKind::recv, p.to_server, 4, in.data(), 500);
        post(*p.client, *r);
        auto s = make_op(OpKind::send, p.to_client, 4, data.data(), 500);
        post(*p.server, *s);
        REQUIRE(p.run([&] { return r->completed && s->completed; }));
        CHECK(in == data);
    }
}

TEST_CASE("tcp native list I/O with mismatched segment lists", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    CHECK(p.client->native_lists());
    for (std::size_t total : {std::size_t(9000), std::size_t(300000)}) {
        auto data = pattern(total, 7);
        const std::size_t a = total / 3, b = total / 2;
        std::vector<Segment> out{{data.data(), bmi_size_t(a)},
                                 {data.data() + a, bmi_size_t(b - a)},
                                 {data.data() + b, bmi_size_t(total - b)}};
        std::vector<std::uint8_t> in1(total / 4), in2(total - total / 4);
        std::vector<Segment> in{{in1.data(), bmi_size_t(in1.size())},
                                {in2.data(), bmi_size_t(in2.size())}};
        auto s = make_list_op(OpKind::send, p.to_server, 30, out);
        auto r = make_list_op(OpKind::recv, p.to_client, 30, in);
        post(*p.server, *r);
        post(*p.client, *s);
        REQUIRE(p.run([&] { return r->completed && s->completed; }));
        CHECK(r->error == 0);
        CHECK(r->actual_size == bmi_size_t(total));
        in1.insert(in1.end(), in2.begin(), in2.end());
        CHECK(in1 == data);
    }
}

TEST_CASE("tcp cancel", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    SECTION("a posted receive") {
        std::vector<std::uint8_t> in(100);
        auto r = make_op(OpKind::recv, p.to_client, 40, in.data(), 100);
        REQUIRE(post(*p.server, *r) == 0);
        p.server->cancel(*r);
        CHECK(r->completed);
        CHECK(r->error == -BMI_ECANCEL);
        p.server->cancel(*r);  // already completed: no-op
        CHECK(p.server_sink.completions.size() == 1);
    }
    SECTION("a rendezvous in flight closes its connection; the next send reconnects") {
        auto big = pattern(1 << 20, 8);
        auto s = make_op(OpKind::send, p.to_server, 41, big.data(), 1 << 20);
        REQUIRE(post(*p.client, *s) == 0);
        p.run([] { return false; }, 0.2);  // RTS goes out, nobody answers
        REQUIRE_FALSE(s->completed);
        p.client->cancel(*s);
        CHECK(s->completed);
        CHECK(s->error == -BMI_ECANCEL);
        auto data = pattern(100, 9);
        std::vector<std::uint8_t> in(100);
        auto s2 = make_op(OpKind::send, p.to_server, 42, data.data(), 100);
        REQUIRE(post(*p.client, *s2) >= 0);
        // The new connection announces no address, so the server sees a new anonymous peer;
        // the client's message reaches it as unexpected to learn that peer.
        REQUIRE(p.run([&] { return s2->completed; }));
        CHECK(s2->error == 0);
    }
}

TEST_CASE("tcp head-of-line: small messages overtake an unmatched 32 MiB one", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    const std::size_t big_size = std::size_t(32) << 20;
    auto big = pattern(big_size, 11);
    auto sb = make_op(OpKind::send, p.to_server, 50, big.data(), bmi_size_t(big_size));
    REQUIRE(post(*p.client, *sb) == 0);
    std::vector<std::unique_ptr<Operation>> smalls, recvs;
    std::vector<std::vector<std::uint8_t>> in(8, std::vector<std::uint8_t>(256));
    auto small = pattern(256, 12);
    for (int i = 0; i < 8; ++i) {
        smalls.push_back(make_op(OpKind::send, p.to_server, 51, small.data(), 256));
        post(*p.client, *smalls.back());
        recvs.push_back(make_op(OpKind::recv, p.to_client, 51, in[i].data(), 256));
        post(*p.server, *recvs.back());
    }
    REQUIRE(p.run([&] {
        for (auto& r : recvs)
            if (!r->completed) return false;
        return true;
    }));
    CHECK_FALSE(sb->completed);
    std::vector<std::uint8_t> in_big(big_size);
    auto rb = make_op(OpKind::recv, p.to_client, 50, in_big.data(), bmi_size_t(big_size));
    post(*p.server, *rb);
    REQUIRE(p.run([&] { return rb->completed && sb->completed; }, 10));
    CHECK(rb->error == 0);
    CHECK(checksum(in_big.data(), big_size) == checksum(big.data(), big_size));
}

TEST_CASE("tcp over IPv6 loopback", "[tcp]") {
    Pair p("tcp://[::1]:0");
    if (p.create_status != 0) {
        WARN("::1 unavailable, skipping");
        return;
    }
    CHECK(p.server->listen_address().rfind("tcp://[::1]:", 0) == 0);
    REQUIRE(p.connect());
    CHECK(p.server->peer_host(*p.to_client) == "::1");
    CHECK(p.server->query_range(*p.to_client, "tcp://[::1]", 128) == 1);
    auto data = pattern(200000, 13);
    std::vector<std::uint8_t> in(200000);
    auto r = make_op(OpKind::recv, p.to_client, 60, in.data(), 200000);
    post(*p.server, *r);
    auto s = make_op(OpKind::send, p.to_server, 60, data.data(), 200000);
    post(*p.client, *s);
    REQUIRE(p.run([&] { return r->completed && s->completed; }));
    CHECK(in == data);
}

TEST_CASE("tcp peer failure completes pending operations", "[tcp]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::uint8_t> in(100);
    auto r = make_op(OpKind::recv, p.to_server, 70, in.data(), 100);
    REQUIRE(post(*p.client, *r) == 0);
    p.server.reset();  // the server process "dies"
    REQUIRE(p.run_client_only([&] { return r->completed; }));
    CHECK(r->error < 0);
}

namespace {
// A server listening on address and a client, without the lookup of the announced address that
// Pair does: "tcp://NULL:port" is announced but, like OrangeFS, no client can look it up.
struct ServerAndClient {
    TestSink server_sink;
    TestSink client_sink;
    std::unique_ptr<Method> server;
    std::unique_ptr<Method> client;
    int create_status = 0;

    explicit ServerAndClient(const std::string& address, int flags = BMI_INIT_SERVER) {
        Config sc;
        sc.listen_address = address;
        sc.flags = flags;
        create_status = tcp::create(sc, server_sink, server);
        if (create_status == 0) create_status = tcp::create(Config{}, client_sink, client);
    }

    std::string port() const {
        const std::string addr = server->listen_address();
        return addr.substr(addr.rfind(':') + 1);
    }

    // Sends one unexpected message from client to the server at address; true once it arrived.
    bool reaches(const std::string& address) {
        std::shared_ptr<Peer> peer;
        if (client->lookup(address, peer) != 0) return false;
        auto data = pattern(1000, 21);
        auto s = make_op(OpKind::send_unexpected, peer, 70, data.data(), 1000);
        const std::size_t before = server_sink.unexpected.size();
        post(*client, *s);
        return drive({server.get(), client.get()},
                     [&] { return s->completed && server_sink.unexpected.size() > before; }) &&
               s->error == 0;
    }
};
}  // namespace

TEST_CASE("tcp://NULL:port listens on every address without resolving NULL", "[tcp]") {
    // OrangeFS's servers and tests are configured this way.
    ServerAndClient p("tcp://NULL:0");
    REQUIRE(p.create_status == 0);
    CHECK(p.server->listen_address().rfind("tcp://NULL:", 0) == 0);
    CHECK(p.port() != "0");
    CHECK(p.reaches("tcp://127.0.0.1:" + p.port()));
    // Dual-stack where the kernel has IPv6.
    ServerAndClient v6("tcp://[::1]:0", BMI_INIT_SERVER | BMI_TCP_BIND_SPECIFIC);
    if (v6.create_status == 0)
        CHECK(p.reaches("tcp://[::1]:" + p.port()));
    else
        WARN("::1 unavailable; the IPv6 half is not checked");
}

TEST_CASE("tcp listen addresses ignore trailing whitespace", "[tcp]") {
    ServerAndClient p("tcp://127.0.0.1:0\n");
    REQUIRE(p.create_status == 0);
    const std::string addr = p.server->listen_address();
    CHECK(addr == "tcp://127.0.0.1:" + p.port());
    CHECK(p.reaches(addr));
    ServerAndClient spaced("tcp://NULL:0 \t\r\n");
    CHECK(spaced.create_status == 0);
}

TEST_CASE("tcp with BMI_TCP_BIND_SPECIFIC the listen host must resolve", "[tcp]") {
    const int specific = BMI_INIT_SERVER | BMI_TCP_BIND_SPECIFIC;
    CHECK(ServerAndClient("tcp://NULL:0", specific).create_status == -BMI_EHOSTNTFD);
    ServerAndClient p("tcp://127.0.0.1:0\n", specific);
    REQUIRE(p.create_status == 0);
    CHECK(p.reaches(p.server->listen_address()));
}

TEST_CASE("a rendezvous receive posted after the stall timeout still completes", "[tcp]") {
    // The stall clock runs from the last byte read. An RTS that waited longer than the stall
    // timeout for its receive must not make the transfer look stalled the moment its CTS goes.
    setenv("BMI_TCP_STALL_TIMEOUT_MS", "300", 1);
    Pair p;
    unsetenv("BMI_TCP_STALL_TIMEOUT_MS");
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    const std::size_t size = std::size_t(1) << 20;
    auto data = pattern(size, 9);
    std::vector<std::uint8_t> in(size);
    auto s = make_op(OpKind::send, p.to_server, 31, data.data(), static_cast<bmi_size_t>(size));
    REQUIRE(post(*p.client, *s) == 0);
    p.run([] { return false; }, 0.8);  // the RTS arrives and waits past the stall timeout
    CHECK_FALSE(s->completed);
    auto r = make_op(OpKind::recv, p.to_client, 31, in.data(), static_cast<bmi_size_t>(size));
    post(*p.server, *r);
    REQUIRE(p.run([&] { return r->completed && s->completed; }));
    CHECK(r->error == 0);
    CHECK(s->error == 0);
    CHECK(checksum(in.data(), size) == checksum(data.data(), size));
}

// Our process away past a peer deadline (a debugger, the scheduler) while the peer did its part:
// when the deadline is looked at, what the peer did waits for us unread, and the connection
// must live on. Both sides sleep here, so the deadline is due before the peer's bytes (or its
// reading) come: a check that looks only at what we have taken would close the connection.
namespace {
bool never() { return false; }
}  // namespace

TEST_CASE("a stall deadline that finds the peer's bytes unread keeps the connection", "[tcp]") {
    Pair p("tcp://127.0.0.1:0", 0, "tcp_stall_timeout_ms=200");
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    const std::size_t size = std::size_t(8) << 20;
    auto data = pattern(size, 12);
    std::vector<std::uint8_t> in(size);
    // The RTS reaches the server before its receive, so the CTS starts the stall clock.
    auto s = make_op(OpKind::send, p.to_server, 32, data.data(), static_cast<bmi_size_t>(size));
    REQUIRE(post(*p.client, *s) == 0);
    p.run(never, 0.1);
    auto r = make_op(OpKind::recv, p.to_client, 32, in.data(), static_cast<bmi_size_t>(size));
    post(*p.server, *r);
    drive({p.server.get()}, never, 0.05);  // the CTS goes out: DATA is owed
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    drive({p.client.get()}, never, 0.05);  // the client sends what it owes
    REQUIRE(p.run([&] { return r->completed && s->completed; }, 10));
    CHECK(r->error == 0);
    CHECK(s->error == 0);
    CHECK(checksum(in.data(), size) == checksum(data.data(), size));
}

TEST_CASE("a send deadline that finds our socket writable again keeps the connection", "[tcp]") {
    Pair p("tcp://127.0.0.1:0", 0, "", "tcp_send_timeout_ms=200");
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    // Many eager messages, more than the socket buffers hold: the client's output waits.
    constexpr int count = 2048;
    constexpr std::size_t each = 8192;
    auto data = pattern(each, 13);
    std::vector<std::vector<std::uint8_t>> in(count, std::vector<std::uint8_t>(each));
    std::vector<std::unique_ptr<Operation>> recvs, sends;
    for (int i = 0; i < count; ++i) {
        recvs.push_back(make_op(OpKind::recv, p.to_client, 33, in[i].data(), bmi_size_t(each)));
        post(*p.server, *recvs.back());
    }
    for (int i = 0; i < count; ++i) {
        sends.push_back(make_op(OpKind::send, p.to_server, 33, data.data(), bmi_size_t(each)));
        post(*p.client, *sends.back());
    }
    drive({p.client.get()}, never, 0.05);  // the socket fills: the clock starts
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    drive({p.server.get()}, never, 0.05);  // the server takes what waits
    const auto all_done = [&] {
        for (int i = 0; i < count; ++i)
            if (!recvs[i]->completed || !sends[i]->completed) return false;
        return true;
    };
    REQUIRE(p.run(all_done, 10));
    int send_errors = 0, recv_errors = 0;
    for (int i = 0; i < count; ++i) {
        send_errors += sends[i]->error != 0;
        recv_errors += recvs[i]->error != 0;
    }
    CHECK(send_errors == 0);
    CHECK(recv_errors == 0);
}
