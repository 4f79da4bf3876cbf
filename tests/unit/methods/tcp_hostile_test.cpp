// SPDX-License-Identifier: LGPL-2.1-or-later
// A hostile peer made of raw sockets against the tcp method (issue 13, SPEC §6): a protocol
// error costs the sender its own connection and nothing else, an announced address routes
// nothing, and what a peer can make us hold is bounded.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "full_table.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "process_cpu.hpp"
#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;

namespace {

// Sends one legacy unexpected message on fd and returns the server's peer for it.
std::shared_ptr<Peer> introduce(int fd, Pair& p) {
    auto hi = legacy_frame(Mode::unexpected, 1, {'h', 'i'});
    const std::size_t before = p.server_sink.unexpected.size();
    REQUIRE(raw_write(fd, hi.data(), hi.size(), *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return p.server_sink.unexpected.size() > before; }));
    return p.server_sink.unexpected.back().peer;
}

std::string loopback_address(std::uint16_t port) {
    return "tcp://127.0.0.1:" + std::to_string(port);
}

}  // namespace

TEST_CASE("a duplicate RTS cookie is a protocol error on that connection only", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    int fd = raw_v2_connect(port_from(p.server->listen_address()), "", *p.server);
    REQUIRE(fd >= 0);
    auto peer = introduce_v2(fd, p);
    auto rts = v2_frame(Mode::rts, 5, 100000, 7);
    REQUIRE(raw_write(fd, rts.data(), rts.size(), *p.server));
    REQUIRE(raw_write(fd, rts.data(), rts.size(), *p.server));
    CHECK(raw_closed(fd, *p.server));
    close(fd);

    // Neither announcement can be matched any more: both receives fail at once.
    std::vector<std::uint8_t> in1(100000), in2(100000);
    auto r1 = make_op(OpKind::recv, peer, 5, in1.data(), 100000);
    auto r2 = make_op(OpKind::recv, peer, 5, in2.data(), 100000);
    post(*p.server, *r1);
    post(*p.server, *r2);
    REQUIRE(p.run([&] { return r1->completed && r2->completed; }));
    CHECK(r1->error < 0);
    CHECK(r2->error < 0);

    // The honest client is untouched.
    auto data = pattern(200000, 1);
    std::vector<std::uint8_t> got(200000);
    auto r = make_op(OpKind::recv, p.to_client, 6, got.data(), 200000);
    auto s = make_op(OpKind::send, p.to_server, 6, data.data(), 200000);
    post(*p.server, *r);
    post(*p.client, *s);
    REQUIRE(p.run([&] { return r->completed && s->completed; }));
    CHECK(r->error == 0);
    CHECK(got == data);
}

TEST_CASE("a protocol error fails the receives posted for that peer", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto peer = introduce(fd, p);
    std::vector<std::uint8_t> in(100);
    auto r = make_op(OpKind::recv, peer, 9, in.data(), 100);
    REQUIRE(post(*p.server, *r) == 0);
    std::vector<std::uint8_t> junk(legacy_header_size, 0x11);
    REQUIRE(raw_write(fd, junk.data(), junk.size(), *p.server));
    REQUIRE(drive(
        {p.server.get()}, [&] { return r->completed; }, 2.0));
    CHECK(r->error == -BMI_EPROTO);
    close(fd);
}

TEST_CASE("an announced address does not take over another server's traffic", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    std::uint16_t other_port = 0;
    int other = raw_listen(other_port);
    // The attacker claims to be the other server.
    int fd = raw_v2_connect(port_from(p.server->listen_address()), loopback_address(other_port),
                            *p.server);
    REQUIRE(fd >= 0);
    introduce_v2(fd, p);

    std::shared_ptr<Peer> target;
    REQUIRE(p.server->lookup(loopback_address(other_port), target) == 0);
    char msg[] = "for the other server";
    auto s = make_op(OpKind::send, target, 3, msg, sizeof msg);
    post(*p.server, *s);
    // The message goes to a new connection to the real address, never to the attacker.
    int real = raw_accept(other, *p.server);
    CHECK(real >= 0);
    CHECK(raw_silent(fd, *p.server));
    // Both sockets gone, the send fails instead of waiting (and the op can be freed).
    if (real >= 0) close(real);
    close(other);
    CHECK(drive({p.server.get()}, [&] { return s->completed; }));
    close(fd);
}

TEST_CASE("an announced address does not inject into another client's receives", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    // An honest client that listens and announces its address.
    TestSink honest_sink;
    std::unique_ptr<Method> honest;
    Config hc;
    hc.listen_address = "tcp://127.0.0.1:0";
    hc.flags = BMI_INIT_SERVER;
    REQUIRE(create(hc, honest_sink, honest) == 0);
    std::shared_ptr<Peer> to_server;
    REQUIRE(honest->lookup(p.server->listen_address(), to_server) == 0);
    char hi[] = "hi";
    auto intro = make_op(OpKind::send_unexpected, to_server, 1, hi, sizeof hi);
    post(*honest, *intro);
    auto both = [&](const std::function<bool()>& done) {
        return drive({p.server.get(), honest.get()}, done);
    };
    REQUIRE(both([&] { return !p.server_sink.unexpected.empty() && intro->completed; }));
    auto honest_peer = p.server_sink.unexpected.back().peer;

    int fd =
        raw_v2_connect(port_from(p.server->listen_address()), honest->listen_address(), *p.server);
    REQUIRE(fd >= 0);
    std::vector<std::uint8_t> got(64);
    auto r = make_op(OpKind::recv, honest_peer, 5, got.data(), 64);
    REQUIRE(post(*p.server, *r) == 0);
    auto evil = v2_frame(Mode::eager, 5, 4, 0);
    evil.insert(evil.end(), {'e', 'v', 'i', 'l'});
    REQUIRE(raw_write(fd, evil.data(), evil.size(), *p.server));
    CHECK(raw_silent(fd, *p.server));
    CHECK_FALSE(r->completed);

    char good[] = "good";
    auto s = make_op(OpKind::send, to_server, 5, good, sizeof good);
    post(*honest, *s);
    REQUIRE(both([&] { return r->completed && s->completed; }));
    CHECK(r->error == 0);
    CHECK(std::string(reinterpret_cast<char*>(got.data())) == "good");
    close(fd);
}

TEST_CASE("the server never connects out to an address a client announced", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    std::uint16_t victim_port = 0;
    int victim = raw_listen(victim_port);
    int fd = raw_v2_connect(port_from(p.server->listen_address()), loopback_address(victim_port),
                            *p.server);
    REQUIRE(fd >= 0);
    auto peer = introduce_v2(fd, p);
    close(fd);
    // Wait until the server has seen the close, then answer the request it had received.
    drive(
        {p.server.get()}, [] { return false; }, 0.3);
    char reply[] = "reply";
    auto s = make_op(OpKind::send, peer, 2, reply, sizeof reply);
    post(*p.server, *s);
    REQUIRE(drive(
        {p.server.get()}, [&] { return s->completed; }, 2.0));
    CHECK(s->error == -BMI_ECONNRESET);
    int reflected = -1;
    drive(
        {p.server.get()}, [&] { return (reflected = accept(victim, nullptr, nullptr)) >= 0; }, 0.3);
    CHECK(reflected < 0);
    if (reflected >= 0) close(reflected);
    close(victim);
}

TEST_CASE("early data is bounded per peer; the sender waits and nothing is lost",
          "[tcp][hostile]") {
    setenv("BMI_TCP_EARLY_PEER_BYTES", "256K", 1);
    Pair p;
    unsetenv("BMI_TCP_EARLY_PEER_BYTES");
    REQUIRE(p.create_status == 0);
    auto& server = static_cast<TcpMethod&>(*p.server);
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto peer = introduce(fd, p);

    // 4,000 eager messages of 4 KiB (16 MB, more than loopback's socket buffers hold) with no
    // receive posted.
    constexpr int count = 4000;
    constexpr std::size_t size = 4096;
    std::vector<std::uint8_t> stream;
    for (int i = 0; i < count; ++i) {
        auto frame = legacy_frame(Mode::eager, 7, pattern(size, static_cast<std::uint32_t>(i)));
        stream.insert(stream.end(), frame.begin(), frame.end());
    }
    std::size_t written = 0;
    auto pump = [&] {
        if (written < stream.size()) {
            ssize_t n = send(fd, stream.data() + written, stream.size() - written, MSG_NOSIGNAL);
            if (n > 0) written += static_cast<std::size_t>(n);
        }
    };
    bmi_size_t most = 0;
    drive(
        {p.server.get()},
        [&] {
            pump();
            most = std::max(most, server.early_bytes_held());
            return false;
        },
        1.0);
    CHECK(most <= 256 * 1024);
    CHECK(most >= 128 * 1024);       // the budget was used, not bypassed
    CHECK(written < stream.size());  // the rest waits in the sender's socket

    // Receives posted now take every message, intact and in order.
    std::vector<std::vector<std::uint8_t>> got(count, std::vector<std::uint8_t>(size));
    std::vector<std::unique_ptr<Operation>> recvs;
    for (int i = 0; i < count; ++i) {
        recvs.push_back(make_op(OpKind::recv, peer, 7, got[i].data(), size));
        post(*p.server, *recvs.back());
    }
    REQUIRE(drive(
        {p.server.get()},
        [&] {
            pump();
            return std::all_of(recvs.begin(), recvs.end(), [](auto& r) { return r->completed; });
        },
        10.0));
    for (int i = 0; i < count; ++i) {
        CHECK(recvs[i]->error == 0);
        CHECK(got[i] == pattern(size, static_cast<std::uint32_t>(i)));
    }
    CHECK(server.early_bytes_held() == 0);
    close(fd);
}

TEST_CASE("a malformed limit fails creation instead of falling back", "[tcp][hostile]") {
    setenv("BMI_TCP_EARLY_TOTAL_BYTES", "lots", 1);
    Pair p;
    unsetenv("BMI_TCP_EARLY_TOTAL_BYTES");
    CHECK(p.create_status == -BMI_EINVAL);
}

TEST_CASE("what a departed client sent early is released", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    auto& server = static_cast<TcpMethod&>(*p.server);
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto frame = legacy_frame(Mode::eager, 3, pattern(8192, 1));
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return server.early_bytes_held() > 0; }));
    close(fd);
    // The client never introduced itself, so no receive can ever name it.
    CHECK(drive({p.server.get()}, [&] { return server.early_bytes_held() == 0; }));
}

TEST_CASE("a large send the receiver never clears fails after the rendezvous timeout",
          "[tcp][hostile]") {
    setenv("BMI_TCP_RENDEZVOUS_TIMEOUT_MS", "300ms", 1);
    Pair p;
    unsetenv("BMI_TCP_RENDEZVOUS_TIMEOUT_MS");
    REQUIRE(p.create_status == 0);
    // A v2 client that asks and then never answers the RTS of the reply.
    int fd = raw_v2_connect(port_from(p.server->listen_address()), "", *p.server);
    REQUIRE(fd >= 0);
    auto peer = introduce_v2(fd, p);
    auto reply = pattern(1 << 20, 4);
    auto s = make_op(OpKind::send, peer, 8, reply.data(), 1 << 20);
    REQUIRE(post(*p.server, *s) == 0);
    Header rts = read_header(fd, true, *p.server);
    CHECK(rts.mode == Mode::rts);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(drive(
        {p.server.get()}, [&] { return s->completed; }, 3.0));
    CHECK(s->error == -BMI_ETIMEDOUT);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    close(fd);
}

namespace {
// A raw v2 peer of a server whose stall timeout is 300 ms announced a 1 MiB transfer (cookie
// 99) to a receive posted for it and got the CTS: from now on it owes the server DATA.
struct OwedTransfer {
    Pair p;
    int fd = -1;
    std::vector<std::uint8_t> in = std::vector<std::uint8_t>(1 << 20);
    std::unique_ptr<Operation> r;

    OwedTransfer() : p(stall_300ms()) {
        unsetenv("BMI_TCP_STALL_TIMEOUT_MS");
        REQUIRE(p.create_status == 0);
        fd = raw_v2_connect(port_from(p.server->listen_address()), "", *p.server);
        REQUIRE(fd >= 0);
        auto peer = introduce_v2(fd, p);
        r = make_op(OpKind::recv, peer, 4, in.data(), 1 << 20);
        REQUIRE(post(*p.server, *r) == 0);
        auto rts = v2_frame(Mode::rts, 4, 1 << 20, 99);
        REQUIRE(raw_write(fd, rts.data(), rts.size(), *p.server));
        Header cts = read_header(fd, true, *p.server);
        CHECK(cts.mode == Mode::cts);
    }
    ~OwedTransfer() { close(fd); }
    OwedTransfer(const OwedTransfer&) = delete;
    OwedTransfer& operator=(const OwedTransfer&) = delete;

    // The server reads its settings when it starts: the variable is set only for that.
    static std::string stall_300ms() {
        setenv("BMI_TCP_STALL_TIMEOUT_MS", "300", 1);
        return "tcp://127.0.0.1:0";
    }
};
}  // namespace

TEST_CASE("a transfer whose DATA never comes times out", "[tcp][hostile]") {
    OwedTransfer t;
    // ... and no DATA follows.
    REQUIRE(drive(
        {t.p.server.get()}, [&] { return t.r->completed; }, 3.0));
    CHECK(t.r->error == -BMI_ETIMEDOUT);
}

TEST_CASE("a transfer that trickles lives past the stall timeout and dies one after it stops",
          "[tcp][hostile]") {
    // The stall clock moves with every read that brings bytes, without reading the clock per
    // read: the deadline's wake-ups compare a count (kit::ProgressDeadline).
    OwedTransfer t;
    Pair& p = t.p;
    const int fd = t.fd;
    auto& r = t.r;
    auto data = v2_frame(Mode::data, 4, 1 << 20, 99);
    REQUIRE(raw_write(fd, data.data(), data.size(), *p.server));
    // 100 bytes every 50 ms for 1.2 s: four stall timeouts, none of them without a byte.
    const std::vector<std::uint8_t> piece(100, 7);
    auto last_byte = std::chrono::steady_clock::now();
    int pieces = 0;
    drive(
        {p.server.get()},
        [&] {
            if (r->completed) return true;
            if (std::chrono::steady_clock::now() - last_byte < std::chrono::milliseconds(50))
                return false;
            REQUIRE(send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) == 100);
            last_byte = std::chrono::steady_clock::now();
            return ++pieces == 24;
        },
        5.0);
    REQUIRE_FALSE(r->completed);
    REQUIRE(pieces == 24);
    REQUIRE(drive(
        {p.server.get()}, [&] { return r->completed; }, 3.0));
    CHECK(r->error == -BMI_ETIMEDOUT);
    const auto quiet = std::chrono::steady_clock::now() - last_byte;
    CHECK(quiet >= std::chrono::milliseconds(300));
    CHECK(quiet < std::chrono::milliseconds(1500));
}

namespace {
int open_descriptors() {
    int n = 0;
    for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

}  // namespace

TEST_CASE("out of descriptors, the server sheds new connections and keeps serving",
          "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    const std::uint16_t port = port_from(p.server->listen_address());
    int ready[2], release[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(release) == 0);
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    rlimit tight = saved;
    tight.rlim_cur = static_cast<rlim_t>(open_descriptors() + 4);

    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(release[1]);  // so that the parent's close is our end-of-file
        // 40 clients that connect and say nothing.
        for (int i = 0; i < 40; ++i) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in sa = loopback(port);
            if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) close(fd);
        }
        char c = 1;
        if (write(ready[1], &c, 1) != 1) _exit(1);
        if (read(release[0], &c, 1) < 0) _exit(1);
        _exit(0);
    }
    REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
    char c = 0;
    close(release[0]);
    REQUIRE(read(ready[0], &c, 1) == 1);
    const double before = bmi::test::process_cpu_seconds();
    drive(
        {p.server.get()}, [] { return false; }, 0.5);
    const double spent = bmi::test::process_cpu_seconds() - before;
    CHECK(spent < 0.25);  // a server spinning on EMFILE burns the whole 0.5 s

    // The client served before the flood still is, both ways.
    auto data = pattern(1000, 3);
    std::vector<std::uint8_t> got(1000), back(1000);
    auto r = make_op(OpKind::recv, p.to_client, 5, got.data(), 1000);
    auto s = make_op(OpKind::send, p.to_server, 5, data.data(), 1000);
    auto r2 = make_op(OpKind::recv, p.to_server, 6, back.data(), 1000);
    auto s2 = make_op(OpKind::send, p.to_client, 6, data.data(), 1000);
    post(*p.server, *r);
    post(*p.client, *s);
    post(*p.client, *r2);
    post(*p.server, *s2);
    CHECK(p.run([&] { return r->completed && s->completed && r2->completed && s2->completed; }));
    CHECK(got == data);
    CHECK(back == data);

    REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    close(release[1]);
    int status = 0;
    waitpid(child, &status, 0);
    close(ready[0]);
    close(ready[1]);
}

// The reserve descriptor is taken when the server listens: a table that fills before the
// first client ever comes still leaves one to accept that client with and close it.
TEST_CASE("out of descriptors before its first accept, the server sheds and later serves",
          "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    const int waiting = raw_connect(port_from(p.server->listen_address()));
    {
        bmi::test::FullTable full(0);
        const double before = bmi::test::process_cpu_seconds();
        drive(
            {p.server.get()}, [] { return false; }, 0.5);
        CHECK(bmi::test::process_cpu_seconds() - before <
              0.25);  // spinning on EMFILE burns the whole 0.5 s
    }
    // Shed: accepted and closed at once, so the client reads the end of the stream (or a
    // reset), not silence until some timeout of its own.
    pollfd pfd{waiting, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 2000) == 1);
    char byte = 0;
    const ssize_t n = read(waiting, &byte, 1);
    CHECK((n == 0 || (n < 0 && errno == ECONNRESET)));
    close(waiting);

    // With descriptors free again, a client gets in and is served.
    CHECK(served(p, 7, 1000));
}

TEST_CASE("a peer trickling an unexpected body holds none of the quota", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    p.server_sink.quota = 20000;  // room for one 16 KB request
    // The attacker announces 16,000 bytes and sends ten.
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto frame = legacy_frame(Mode::unexpected, 1, pattern(16000, 1));
    REQUIRE(raw_write(fd, frame.data(), legacy_header_size + 10, *p.server));
    drive(
        {p.server.get()}, [] { return false; }, 0.2);
    CHECK(p.server_sink.used == 0);

    auto request = pattern(16000, 2);
    auto s = make_op(OpKind::send_unexpected, p.to_server, 2, request.data(), 16000);
    post(*p.client, *s);
    REQUIRE(p.run([&] { return !p.server_sink.unexpected.empty(); }));
    const auto& got = p.server_sink.unexpected.back();
    CHECK(got.tag == 2);
    CHECK(std::memcmp(got.buffer, request.data(), 16000) == 0);
    close(fd);
}

TEST_CASE("a parked connection whose anonymous peer left is closed at once", "[tcp][hostile]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    auto& server = static_cast<TcpMethod&>(*p.server);
    // A legacy REND header with no receive parks the connection (reading stops), and the
    // sender, which never introduced itself, goes away.
    int fd = raw_connect(port_from(p.server->listen_address()));
    Header h;
    h.mode = Mode::rendezvous;
    h.tag = 4;
    h.size = 1 << 20;
    std::uint8_t buf[legacy_header_size];
    encode_header(h, Framing::orangefs, buf);
    REQUIRE(raw_write(fd, buf, sizeof buf, *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return server.early_bytes_held() > 0; }));
    close(fd);
    CHECK(drive(
        {p.server.get()}, [&] { return server.early_bytes_held() == 0; }, 2.0));
}
