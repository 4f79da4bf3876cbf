// SPDX-License-Identifier: LGPL-2.1-or-later
// kit::Acceptor over a real listening socket on loopback: per-source admission, sockets that
// wait for their source's turn, and the choice of what to shed.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>
#include <map>
#include <thread>

#include "methods/kit/acceptor.hpp"
#include "tests/conformance/raw_socket.hpp"

namespace {

using bmi::method::kit::AcceptedSocket;
using bmi::method::kit::Acceptor;
using bmi::method::kit::AcceptorHost;
using bmi::method::kit::DeadlineKey;
using bmi::method::kit::Deadlines;
using bmi::method::kit::SheddingChoice;
using Clock = std::chrono::steady_clock;

// The method side: each admitted socket is a connection it keeps open until told to close.
class Host final : public AcceptorHost {
public:
    Acceptor* acceptor = nullptr;
    std::map<std::uint64_t, int> open;  // connection id -> socket
    std::string refused_source;
    std::optional<std::string> source_of(AcceptedSocket& socket) override {
        char text[INET_ADDRSTRLEN] = {};
        const auto* in = reinterpret_cast<const sockaddr_in*>(&socket.from);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        if (refused_source == text) return std::nullopt;
        return std::string(text);
    }
    std::optional<std::uint64_t> start_accepted(const AcceptedSocket& socket) override {
        open[next_id] = socket.fd;
        return next_id++;
    }
    void close_for_room(std::uint64_t id) override { close_connection(id); }
    void offer_for_shedding(SheddingChoice&) override {}
    void watch_listeners(bool) override {}
    void close_connection(std::uint64_t id) {
        close(open.at(id));
        open.erase(id);
        acceptor->release(id);
    }
    std::uint64_t next_id = 1;
};

// A client socket from `source` (any 127/8 address is this host's loopback).
int connect_from(const char* source, std::uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    return fd;
}

// Accepts until the backlog is empty (the connects above completed in the kernel already).
void accept_pending(Acceptor& acceptor, int listen_fd) {
    pollfd p{listen_fd, POLLIN, 0};
    while (poll(&p, 1, 100) == 1) acceptor.accept_all(listen_fd, 0);
}

// Runs the deadlines due within `ms`.
void run_deadlines(Deadlines& timers, Acceptor& acceptor, int ms) {
    pollfd p{timers.fd(), POLLIN, 0};
    const auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < until) {
        if (poll(&p, 1, 10) != 1) continue;
        timers.expire([&](DeadlineKey key, Clock::time_point now) {
            if (Acceptor::owns(key)) acceptor.on_deadline(key, now);
        });
    }
}

bool peer_closed(int fd) {
    pollfd p{fd, POLLIN, 0};
    char byte;
    return poll(&p, 1, 0) == 1 && recv(fd, &byte, 1, MSG_DONTWAIT) == 0;
}

// A listening socket on the loopback with an acceptor over it.
struct Bench {
    Deadlines timers;
    Host host;
    Acceptor acceptor{host, timers, bmi::support::LogArea::tcp, "test"};
    std::uint16_t port = 0;
    int listen_fd = -1;
    Bench(std::size_t per_source, std::chrono::milliseconds setup_timeout) {
        REQUIRE(timers.open() == 0);
        host.acceptor = &acceptor;
        acceptor.set_limits(per_source, setup_timeout);
        listen_fd = bmi::test::listen_on_loopback(port, SOCK_NONBLOCK);
        REQUIRE(listen_fd >= 0);
    }
    ~Bench() {}
    int connect(const char* source) { return connect_from(source, port); }
    void accept() { accept_pending(acceptor, listen_fd); }
};

}  // namespace

TEST_CASE("acceptor: a source at its bound waits for its turn; other sources do not",
          "[admission]") {
    Bench bench(2, std::chrono::milliseconds(60'000));
    auto& acceptor = bench.acceptor;
    auto& host = bench.host;

    std::vector<int> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(bench.connect("127.0.0.2"));
    clients.push_back(bench.connect("127.0.0.3"));
    bench.accept();
    // Two of 127.0.0.2 and the one of 127.0.0.3 are connections; the third of .2 waits, open.
    CHECK(host.open.size() == 3);
    CHECK(acceptor.held("127.0.0.2") == 2);
    CHECK(acceptor.held("127.0.0.3") == 1);
    CHECK(acceptor.waiting() == 1);
    CHECK_FALSE(peer_closed(clients[2]));

    // One handshake of .2 ends: the waiting socket is admitted at the next deadline pass.
    acceptor.release(1);
    CHECK(acceptor.held("127.0.0.2") == 1);
    run_deadlines(bench.timers, acceptor, 100);
    CHECK(acceptor.waiting() == 0);
    CHECK(acceptor.held("127.0.0.2") == 2);
    CHECK(host.open.size() == 4);
    CHECK(acceptor.unproven(host.next_id - 1));

    for (int fd : clients) close(fd);
}

TEST_CASE("acceptor: a waiting socket is closed at its setup deadline", "[admission]") {
    Bench bench(1, std::chrono::milliseconds(150));
    auto& acceptor = bench.acceptor;
    const int first = bench.connect("127.0.0.2");
    const int second = bench.connect("127.0.0.2");
    bench.accept();
    REQUIRE(acceptor.waiting() == 1);
    run_deadlines(bench.timers, acceptor, 400);
    CHECK(acceptor.waiting() == 0);
    CHECK(peer_closed(second));
    CHECK_FALSE(peer_closed(first));  // the admitted one is the method's to time out
    close(first);
    close(second);
}

TEST_CASE("acceptor: a newcomer replaces its source's oldest once that one had time to speak",
          "[admission]") {
    Bench bench(1, std::chrono::milliseconds(60'000));
    auto& acceptor = bench.acceptor;
    auto& host = bench.host;
    const int silent = bench.connect("127.0.0.2");
    bench.accept();
    REQUIRE(host.open.size() == 1);
    std::this_thread::sleep_for(bmi::method::kit::time_to_speak + std::chrono::milliseconds(100));
    const int newcomer = bench.connect("127.0.0.2");
    bench.accept();
    CHECK(acceptor.waiting() == 0);
    CHECK(host.open.count(1) == 0);  // the silent one was closed for it
    CHECK(host.open.count(2) == 1);
    CHECK(peer_closed(silent));
    close(silent);
    close(newcomer);
}

TEST_CASE("acceptor: a waiting socket replaces its source's oldest once that one had time "
          "to speak",
          "[admission]") {
    Bench bench(1, std::chrono::milliseconds(60'000));
    auto& acceptor = bench.acceptor;
    auto& host = bench.host;
    const int silent = bench.connect("127.0.0.2");
    const int next = bench.connect("127.0.0.2");
    bench.accept();
    REQUIRE(acceptor.waiting() == 1);
    run_deadlines(bench.timers, acceptor, 300);
    CHECK(acceptor.waiting() == 1);  // the silent one is still new
    run_deadlines(bench.timers, acceptor, 1200);
    CHECK(acceptor.waiting() == 0);
    CHECK(host.open.count(1) == 0);
    CHECK(host.open.count(2) == 1);
    CHECK(acceptor.unproven(2));
    CHECK(peer_closed(silent));
    close(silent);
    close(next);
}

TEST_CASE("acceptor: the newest waiting socket of a source goes first", "[admission]") {
    Bench bench(1, std::chrono::milliseconds(60'000));
    auto& acceptor = bench.acceptor;
    auto& host = bench.host;
    const int first = bench.connect("127.0.0.2");
    bench.accept();
    const int older = bench.connect("127.0.0.2");
    bench.accept();
    const int newer = bench.connect("127.0.0.2");
    bench.accept();
    REQUIRE(acceptor.waiting() == 2);
    host.close_connection(1);
    run_deadlines(bench.timers, acceptor, 100);
    // The one that came last holds the place; the flood before it waits on.
    CHECK(acceptor.waiting() == 1);
    REQUIRE(host.open.size() == 1);
    sockaddr_in local{}, started{};
    socklen_t length = sizeof local;
    getsockname(newer, reinterpret_cast<sockaddr*>(&local), &length);
    length = sizeof started;
    getpeername(host.open.begin()->second, reinterpret_cast<sockaddr*>(&started), &length);
    CHECK(local.sin_port == started.sin_port);
    close(first);
    close(older);
    close(newer);
}

TEST_CASE("acceptor: a refused source is closed at once and holds nothing", "[admission]") {
    Bench bench(std::numeric_limits<std::size_t>::max(), std::chrono::milliseconds(10'000));
    auto& acceptor = bench.acceptor;
    auto& host = bench.host;
    host.refused_source = "127.0.0.4";
    const int refused = bench.connect("127.0.0.4");
    bench.accept();
    CHECK(host.open.empty());
    CHECK(acceptor.held("127.0.0.4") == 0);
    CHECK(peer_closed(refused));
    close(refused);
}

TEST_CASE("shedding choice: the oldest unproven, else the oldest idle, never the young",
          "[admission]") {
    const auto now = Clock::now();
    const auto old = now - std::chrono::seconds(5);
    const auto older = now - std::chrono::seconds(9);
    const auto young = now - std::chrono::milliseconds(10);
    struct Offer {
        std::uint64_t ticket;
        Clock::time_point at;
        bool unproven;
    };
    const auto pick = [now](std::initializer_list<Offer> offers, std::uint64_t keep = 0) {
        SheddingChoice choice(now, keep);
        for (const Offer& o : offers) choice.offer(o.ticket, o.at, o.unproven);
        return choice.chosen();
    };
    CHECK(pick({{1, older, false}, {2, old, true}, {3, older, true}}) == 3u);
    CHECK(pick({{4, old, false}, {5, older, false}, {6, young, true}}) == 5u);
    CHECK_FALSE(pick({{7, young, true}, {8, young, false}}));
    CHECK(pick({{9, older, true}, {10, old, true}}, 9) == 10u);  // never the one kept
}
