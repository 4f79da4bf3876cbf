// SPDX-License-Identifier: LGPL-2.1-or-later
// TcpMethod::sleep_in_read: the sleep taken in a connection's read instead of epoll_wait ends
// with the peer's bytes, with the peer's close, or at its bound, never after the caller's
// deadline, and is declined wherever something besides that one socket could need us.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "tcp_raw_peer.hpp"
#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
// A client whose read waits last up to `wait_us`, connected to its server.
struct WaitingPair : Pair {
    explicit WaitingPair(long wait_us)
        : Pair("tcp://127.0.0.1:0", 0, "", "tcp_read_wait_us=" + std::to_string(wait_us)) {}
};

// A receive on the client for `size` bytes at `in` from the server, posted (it stays pending).
std::unique_ptr<Operation> receive(Pair& p, bmi_msg_tag_t tag, void* in, bmi_size_t size) {
    auto r = make_op(OpKind::recv, p.to_server, tag, in, size);
    REQUIRE(post(*p.client, *r) == 0);
    return r;
}

// How long m.sleep_in_read(now, now + budget, allowed) took, and what it returned.
struct Sleep {
    bool moved = false;
    Clock::duration took{};
};
Sleep sleep_in_read(Method& m, Clock::duration budget, bool allowed = true) {
    const auto start = Clock::now();
    Sleep out;
    out.moved = m.sleep_in_read(start, start + budget, allowed);
    out.took = Clock::now() - start;
    return out;
}

// Whether m's epoll set (what the control layer sleeps on) turns readable within `limit`.
bool wait_fd_readable(Method& m, int limit_ms) {
    pollfd fd{m.wait_fd(), POLLIN, 0};
    return poll(&fd, 1, limit_ms) == 1;
}

// With a receive posted (and cancelled after), sleep_in_read(now, now + budget) declines: it
// returns false within `limit`.
void check_declined(Pair& p, Clock::duration budget, Clock::duration limit) {
    char in[8];
    auto r = receive(p, 7, in, sizeof in);
    const Sleep slept = sleep_in_read(*p.client, budget);
    CHECK_FALSE(slept.moved);
    CHECK(slept.took < limit);
    p.client->cancel(*r);
    REQUIRE(p.run_client_only([&] { return r->completed; }));
}

// The server sends `size` bytes with `tag` to the client and drives itself until they left.
bool server_sends(Pair& p, bmi_msg_tag_t tag, std::vector<std::uint8_t>& data) {
    auto s = make_op(OpKind::send, p.to_client, tag, data.data(), bmi_size_t(data.size()));
    post(*p.server, *s);
    return drive({p.server.get()}, [&] { return s->completed; }) && s->error == 0;
}
}  // namespace

TEST_CASE("tcp read wait: the peer's message ends the sleep, and reads stay nonblocking after",
          "[tcp]") {
    WaitingPair p(500'000);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::uint8_t> in(64);
    auto r = receive(p, 7, in.data(), bmi_size_t(in.size()));

    auto reply = pattern(40, 3);
    std::atomic<bool> server_done{false};
    std::thread server([&] {
        std::this_thread::sleep_for(50ms);
        auto s = make_op(OpKind::send, p.to_client, 7, reply.data(), bmi_size_t(reply.size()));
        post(*p.server, *s);
        server_done = drive({p.server.get()}, [&] { return s->completed; });
    });
    const Sleep slept = sleep_in_read(*p.client, 10s);
    server.join();
    REQUIRE(server_done);
    CHECK(slept.moved);
    CHECK(slept.took >= 40ms);  // it did sleep ...
    CHECK(slept.took < 450ms);  // ... until the message came, not until the bound
    REQUIRE(p.run_client_only([&] { return r->completed; }));
    CHECK(r->error == 0);
    REQUIRE(r->actual_size == 40);
    CHECK(std::memcmp(in.data(), reply.data(), reply.size()) == 0);

    // The socket is in blocking mode now: every other read and write must still return at
    // once, or these exchanges, driven by nonblocking progress passes, would hang.
    for (int i = 0; i < 20; ++i) {
        auto out = pattern(100 + static_cast<std::size_t>(i) * 3000, static_cast<std::uint32_t>(i));
        std::vector<std::uint8_t> got(out.size());
        const auto outcome = p.exchange(9, out, got);
        REQUIRE(outcome.send_error == 0);
        REQUIRE(outcome.recv_error == 0);
        CHECK(std::memcmp(got.data(), out.data(), out.size()) == 0);
        auto back = make_op(OpKind::recv, p.to_server, 10, got.data(), bmi_size_t(got.size()));
        post(*p.client, *back);
        auto send = make_op(OpKind::send, p.to_client, 10, out.data(), bmi_size_t(out.size()));
        post(*p.server, *send);
        REQUIRE(p.run([&] { return back->completed && send->completed; }));
        CHECK(back->error == 0);
    }
}

TEST_CASE("tcp read wait: with nothing coming the sleep ends at its bound", "[tcp]") {
    WaitingPair p(20'000);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    char in[8];
    auto r = receive(p, 7, in, sizeof in);
    const Sleep slept = sleep_in_read(*p.client, 10s);
    CHECK_FALSE(slept.moved);
    CHECK(slept.took >= 15ms);  // 20 ms, rounded up to the kernel's tick
    CHECK(slept.took < 500ms);
    CHECK_FALSE(r->completed);
    // The control layer sleeps in epoll next: the connection is back in the set, so the
    // server's message makes it readable.
    auto data = pattern(8, 5);
    REQUIRE(server_sends(p, 7, data));
    CHECK(wait_fd_readable(*p.client, 2000));
    REQUIRE(p.run_client_only([&] { return r->completed; }));
    CHECK(r->error == 0);
}

TEST_CASE("tcp read wait: after a read that brought data, progress reads the connection by "
          "hand, and any sleep in epoll finds it back in the set",
          "[tcp]") {
    WaitingPair p(500'000);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    char in[8];
    auto first = receive(p, 7, in, sizeof in);
    auto data = pattern(8, 6);
    REQUIRE(server_sends(p, 7, data));
    REQUIRE(sleep_in_read(*p.client, 10s).moved);  // finds it at once
    REQUIRE(first->completed);

    // Out of the epoll set now: a message does not make the set readable, but a progress
    // pass reads it.
    auto second = receive(p, 8, in, sizeof in);
    REQUIRE(server_sends(p, 8, data));
    CHECK_FALSE(wait_fd_readable(*p.client, 100));
    p.client->progress();
    REQUIRE(second->completed);
    CHECK(second->error == 0);

    // A sleep the control layer takes in epoll (not allowed in a read: another thread came)
    // is preceded by sleep_in_read(..., false), which puts the connection back.
    auto third = receive(p, 9, in, sizeof in);
    CHECK_FALSE(sleep_in_read(*p.client, 10s, false).moved);
    REQUIRE(server_sends(p, 9, data));
    CHECK(wait_fd_readable(*p.client, 2000));
    REQUIRE(p.run_client_only([&] { return third->completed; }));
    CHECK(third->error == 0);
}

TEST_CASE("tcp read wait: a caller's deadline sooner than the bound means no read wait", "[tcp]") {
    WaitingPair p(500'000);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    check_declined(p, 30ms, 25ms);
}

TEST_CASE("tcp read wait is declined where something else may need the process", "[tcp]") {
    SECTION("switched off") {
        WaitingPair p(0);
        REQUIRE(p.create_status == 0);
        REQUIRE(p.connect());
        check_declined(p, 10s, 10ms);
    }
    SECTION("no operation waits for the network") {
        WaitingPair p(500'000);
        REQUIRE(p.create_status == 0);
        REQUIRE(p.connect());
        const Sleep slept = sleep_in_read(*p.client, 10s);
        CHECK_FALSE(slept.moved);
        CHECK(slept.took < 10ms);
    }
    SECTION("a second connection") {
        WaitingPair p(500'000);
        REQUIRE(p.create_status == 0);
        REQUIRE(p.connect());
        // A second server the same client talks to: its messages would wait for the read.
        Pair other;
        REQUIRE(other.create_status == 0);
        std::shared_ptr<Peer> to_other;
        REQUIRE(p.client->lookup(other.server->listen_address(), to_other) == 0);
        char hello[] = "hi";
        auto h = make_op(OpKind::send_unexpected, to_other, 1, hello, sizeof hello);
        post(*p.client, *h);
        REQUIRE(drive({p.client.get(), other.server.get()},
                      [&] { return h->completed && !other.server_sink.unexpected.empty(); }));
        check_declined(p, 10s, 10ms);
    }
}

TEST_CASE("tcp read wait: a peer that closes ends the sleep and fails the receive", "[tcp]") {
    WaitingPair p(500'000);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    char in[8];
    auto r = receive(p, 7, in, sizeof in);
    std::thread server([&] {
        std::this_thread::sleep_for(50ms);
        p.to_client.reset();
        p.server.reset();  // closes its sockets
    });
    const Sleep slept = sleep_in_read(*p.client, 10s);
    server.join();
    CHECK(slept.moved);
    CHECK(slept.took < 450ms);
    REQUIRE(p.run_client_only([&] { return r->completed; }));
    CHECK(r->error != 0);
}

TEST_CASE("tcp read wait: a peer trickling a frame a byte at a time ends each sleep, and the "
          "message arrives whole",
          "[tcp][hostile]") {
    Config config;
    REQUIRE(config.settings.load("tcp_read_wait_us=300000") == 0);
    ClientOfRaw raw(config);
    // A small send brings the connection up; the raw acceptor answers HELLO.
    auto hi = pattern(8, 1);
    auto first = make_op(OpKind::send, raw.peer, 1, hi.data(), 8);
    REQUIRE(post(*raw.client, *first) == 0);
    int fd = -1;
    REQUIRE(raw_accept_hello(raw, feature_rendezvous, fd));
    REQUIRE(drive({raw.client.get()}, [&] { return first->completed; }));

    std::vector<std::uint8_t> in(64);
    auto r = make_op(OpKind::recv, raw.peer, 7, in.data(), bmi_size_t(in.size()));
    REQUIRE(post(*raw.client, *r) == 0);
    const auto body = pattern(40, 9);
    auto frame = v2_frame(Mode::eager, 7, body.size(), 0);
    frame.insert(frame.end(), body.begin(), body.end());
    std::atomic<bool> sent_all{true};
    std::thread trickler([&] {
        for (std::uint8_t byte : frame) {
            std::this_thread::sleep_for(2ms);
            if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1) sent_all = false;
        }
    });
    // The control layer's loop by hand: sleep in the read while it may, a pass otherwise.
    Clock::duration longest{};
    int woken = 0;  // sleeps a byte ended
    const auto start = Clock::now();
    while (!r->completed && Clock::now() - start < 10s) {
        const auto before = Clock::now();
        if (raw.client->sleep_in_read(before, before + 1s, true))
            ++woken;
        else
            raw.client->progress();
        longest = std::max(longest, Clock::now() - before);
    }
    INFO("sleeps in the read that bytes ended: " << woken);
    trickler.join();
    CHECK(sent_all);
    REQUIRE(r->completed);
    CHECK(r->error == 0);
    REQUIRE(r->actual_size == 40);
    CHECK(std::memcmp(in.data(), body.data(), body.size()) == 0);
    // The reads did sleep, and every byte ended the sleep it came into: none lasted the
    // read's bound (300 ms).
    CHECK(woken > 0);
    CHECK(longest < 200ms);
    close(fd);
}
