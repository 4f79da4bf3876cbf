// SPDX-License-Identifier: LGPL-2.1-or-later
// What many hostile connections can make a tcp server hold (issue 37): memory a frame header
// commits us to, descriptors, and time. Each case is a raw-socket attacker against a real
// server; the bound is checked through the server's own accounting or the allocator's.
#include <catch2/catch.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "methods/tcp/tcp_method_impl.hpp"
#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;

namespace {

// Bytes the allocator has handed out and not taken back, mapped chunks included.
std::int64_t heap_in_use() {
    const struct mallinfo2 info = mallinfo2();
    return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
}

// Runs the server while `fds` each send one byte; a trickle slower than any stall timeout
// would still keep every frame alive.
void trickle_one_byte(const std::vector<int>& fds, Pair& p) {
    const std::uint8_t byte = 0x5a;
    for (int fd : fds) REQUIRE(raw_write(fd, &byte, 1, *p.server));
    drive(
        {p.server.get()}, [] { return false; }, 0.2);
}

}  // namespace

TEST_CASE("a header is charged to the early-data budget when its buffer is committed",
          "[tcp][hostile][resources]") {
    setenv("BMI_TCP_EARLY_PEER_BYTES", "1M", 1);
    setenv("BMI_TCP_EARLY_TOTAL_BYTES", "1M", 1);
    Pair p;
    unsetenv("BMI_TCP_EARLY_PEER_BYTES");
    unsetenv("BMI_TCP_EARLY_TOTAL_BYTES");
    REQUIRE(p.create_status == 0);
    auto& server = static_cast<TcpMethod&>(*p.server);
    const std::uint16_t port = port_from(p.server->listen_address());

    // 100 v2 peers that take large eager frames, each announcing one of 512 KiB (no receive is
    // posted for it) and then sending its body a byte at a time.
    constexpr int attackers = 100;
    std::vector<int> fds;
    for (int i = 0; i < attackers; ++i) {
        const int fd =
            raw_v2_connect(port, "", *p.server, feature_rendezvous | feature_large_eager);
        REQUIRE(fd >= 0);
        fds.push_back(fd);
    }
    drive(
        {p.server.get()}, [] { return false; }, 0.1);
    const std::int64_t before = heap_in_use();
    for (int i = 0; i < attackers; ++i) {
        auto header = v2_frame(Mode::eager, 9, v2_large_eager_limit, 0);
        REQUIRE(raw_write(fds[i], header.data(), header.size(), *p.server));
    }
    bmi_size_t most = 0;
    for (int round = 0; round < 3; ++round) {
        trickle_one_byte(fds, p);
        most = std::max(most, server.early_bytes_held());
    }
    // What the headers committed us to stays within the total, and was charged to it.
    CHECK(most <= 1024 * 1024);
    CHECK(most >= v2_large_eager_limit);
    // 100 bodies of 512 KiB would be 50 MiB; the budget admits two of them.
    CHECK(heap_in_use() - before < 4 * 1024 * 1024);

    for (int fd : fds) close(fd);
    CHECK(drive({p.server.get()}, [&] { return server.early_bytes_held() == 0; }));
    // The budget came back: a client that reaches the server now is served.
    CHECK(served(p, 7, 60000));
}

// A silent connection, and a keyed HELLO without its proof, are the shared peer rules'
// (conformance peer_rules_test.cpp); what is tcp's own is a HELLO trickled too slowly.
TEST_CASE("a HELLO trickled a byte at a time is closed at the setup deadline",
          "[tcp][hostile][resources]") {
    setenv("BMI_TCP_SETUP_TIMEOUT_MS", "300", 1);
    Pair p;
    unsetenv("BMI_TCP_SETUP_TIMEOUT_MS");
    REQUIRE(p.create_status == 0);
    const std::uint16_t port = port_from(p.server->listen_address());
    const auto start = std::chrono::steady_clock::now();
    // A HELLO sent a byte every 100 ms: never stalled, never finished.
    const int slow = raw_connect(port);
    const auto hello = encode_hello(Hello{feature_rendezvous, ""}, false);
    std::size_t sent = 0;
    bool slow_closed = false;
    drive(
        {p.server.get()},
        [&] {
            const auto elapsed = std::chrono::steady_clock::now() - start;
            if (sent < hello.size() - 1 && elapsed > std::chrono::milliseconds(100) * (sent + 1) &&
                send(slow, hello.data() + sent, 1, MSG_NOSIGNAL) == 1)
                ++sent;
            char byte;
            const ssize_t n = recv(slow, &byte, 1, 0);
            slow_closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
            return slow_closed;
        },
        3.0);
    CHECK(slow_closed);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    close(slow);

    // A client through its handshake is not on that clock.
    REQUIRE(p.connect());
    drive(
        {p.server.get(), p.client.get()}, [] { return false; }, 0.5);
    CHECK(served(p, 8, 100));
}

namespace {

// Connects to port and waits up to a second for the connect, one at a time so that no SYN is
// dropped and retried later; -1 if the socket could not be made.
int start_idle_connection(std::uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_in sa = loopback(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno == EINPROGRESS) {
        pollfd pfd{fd, POLLOUT, 0};
        poll(&pfd, 1, 1000);
    }
    return fd;
}

// A server in a child process whose descriptor table holds `descriptors` more than it has
// open now; it answers each unexpected message with the same bytes as an expected message on
// tag 9 to its sender, until `release` reaches end-of-file or 30 s pass.
pid_t fork_echo_server(int descriptors, const int (&port_pipe)[2], const int (&release_pipe)[2]) {
    const pid_t child = fork();
    if (child != 0) return child;
    close(port_pipe[0]);
    close(release_pipe[1]);  // so that the parent's close is our end-of-file
    const int port_out = port_pipe[1];
    const int release = release_pipe[0];
    int open_now = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++open_now;
    rlimit tight{};
    getrlimit(RLIMIT_NOFILE, &tight);
    tight.rlim_cur = static_cast<rlim_t>(open_now + descriptors);
    if (setrlimit(RLIMIT_NOFILE, &tight) != 0) _exit(2);
    TestSink sink;
    Config config;
    config.listen_address = "tcp://127.0.0.1:0";
    config.flags = BMI_INIT_SERVER;
    std::unique_ptr<Method> server;
    if (config.settings.load("") != 0 || create(config, sink, server) != 0) _exit(3);
    const std::uint16_t port = port_from(server->listen_address());
    if (write(port_out, &port, sizeof port) != sizeof port) _exit(4);
    std::vector<std::unique_ptr<Operation>> replies;
    std::size_t answered = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        server->progress();
        for (; answered < sink.unexpected.size(); ++answered) {
            const auto& u = sink.unexpected[answered];
            replies.push_back(make_op(OpKind::send, u.peer, 9, u.buffer, u.size));
            post(*server, *replies.back());
        }
        pollfd fds[2] = {{server->wait_fd(), POLLIN, 0}, {release, POLLIN, 0}};
        poll(fds, 2, 5);
        if (fds[1].revents != 0) break;
    }
    _exit(0);
}

// A fresh client sends `text` to the server at port and waits up to `seconds` for the echo.
bool echoed(std::uint16_t port, const std::string& text, double seconds) {
    TestSink sink;
    std::unique_ptr<Method> client;
    REQUIRE(create(Config{}, sink, client) == 0);
    std::shared_ptr<Peer> server;
    REQUIRE(client->lookup("tcp://127.0.0.1:" + std::to_string(port), server) == 0);
    std::vector<char> out(text.begin(), text.end()), back(text.size());
    auto r = make_op(OpKind::recv, server, 9, back.data(), bmi_size_t(back.size()));
    auto s = make_op(OpKind::send_unexpected, server, 1, out.data(), bmi_size_t(out.size()));
    post(*client, *r);
    post(*client, *s);
    const bool done = drive(
        {client.get()}, [&] { return r->completed && s->completed; }, seconds);
    return done && r->error == 0 && s->error == 0 && back == out;
}

}  // namespace

TEST_CASE("connections from one source idle after HELLO do not lock a server's clients out",
          "[tcp][hostile][resources]") {
    // 300 connections from 127.0.0.1 that say HELLO and nothing more, against a server with
    // about 100 free descriptors, then a client from the same host must get an answer. Silent
    // connections are the shared peer rules' (conformance peer_rules_test.cpp).
    int port_pipe[2], release[2];
    REQUIRE(pipe(port_pipe) == 0);
    REQUIRE(pipe(release) == 0);
    const pid_t child = fork_echo_server(100, port_pipe, release);
    REQUIRE(child > 0);
    close(port_pipe[1]);
    close(release[0]);
    std::uint16_t port = 0;
    REQUIRE(read(port_pipe[0], &port, sizeof port) == sizeof port);
    close(port_pipe[0]);

    const auto hello = encode_hello(Hello{feature_rendezvous, ""}, false);
    std::vector<int> idle;
    for (int i = 0; i < 300; ++i) {
        const int fd = start_idle_connection(port);
        if (fd < 0) continue;
        send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
        idle.push_back(fd);
    }
    // The server takes them in, and they outlive the time a newcomer has to speak before it
    // may be closed for another.
    usleep(1500 * 1000);

    CHECK(echoed(port, "still served", 5.0));

    for (int fd : idle) close(fd);
    close(release[1]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a connection that has not finished its handshake holds no read-ahead buffer",
          "[tcp][hostile][resources]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    const std::uint16_t port = port_from(p.server->listen_address());
    drive(
        {p.server.get()}, [] { return false; }, 0.1);
    const std::int64_t before = heap_in_use();
    // 100 connections that each send the first byte of a header and wait.
    std::vector<int> fds;
    for (int i = 0; i < 100; ++i) fds.push_back(raw_connect(port));
    trickle_one_byte(fds, p);
    // With a 32 KiB read-ahead each, they would hold 3.2 MB.
    CHECK(heap_in_use() - before < 1024 * 1024);
    for (int fd : fds) close(fd);
}

TEST_CASE("a peer that reads none of our bytes fails our sends after the send timeout",
          "[tcp][hostile][resources]") {
    Config config;
    REQUIRE(config.settings.load("tcp_send_timeout_ms=300ms") == 0);
    std::vector<std::unique_ptr<Operation>> sends;  // outlives the method that may hold them
    ClientOfRaw raw(config);
    // Far more than the socket buffers of both ends hold.
    constexpr int count = 200;
    constexpr bmi_size_t size = 60000;
    auto data = pattern(static_cast<std::size_t>(size), 8);
    // From the first post: a keyless client writes at once (its upgrade offer rides on the
    // first frames), so a send may start waiting before the handshake below is answered.
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
        sends.push_back(make_op(OpKind::send, raw.peer, 3, data.data(), size));
        post(*raw.client, *sends.back());
    }
    int fd = -1;
    REQUIRE(raw_accept_hello(raw, feature_rendezvous, fd));
    // The peer acknowledges at the TCP level (its kernel is alive) and never reads.
    const bool all_done = drive(
        {raw.client.get()},
        [&] {
            return std::all_of(sends.begin(), sends.end(), [](auto& s) { return s->completed; });
        },
        5.0);
    CHECK(all_done);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    CHECK(std::any_of(sends.begin(), sends.end(),
                      [](auto& s) { return s->error == -BMI_ETIMEDOUT; }));
    close(fd);
}
