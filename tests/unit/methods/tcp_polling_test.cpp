// SPDX-License-Identifier: LGPL-2.1-or-later
// TcpMethod::progress_polling, the pass of a caller that polls in a loop (a test with no idle
// time): it reads the connection the last message came on directly, skips that read on the pass
// right after one that emptied the socket, and looks at the whole epoll set on every fourth
// pass, and on every pass while that connection has output waiting.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;

namespace {
int epoll_waits = 0;  // the test is single-threaded
int socket_reads = 0;
}  // namespace

// Counts the epoll_wait calls of this process and makes them. libbmi.so's calls bind to the
// executable's definition before libc's; epoll_pwait with no mask is the same system call.
extern "C" int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout) {
    ++epoll_waits;
    return static_cast<int>(
        ::syscall(SYS_epoll_pwait, epfd, events, maxevents, timeout, nullptr, _NSIG / 8));
}

// The same for the reads of a socket, both forms.
extern "C" ssize_t recv(int fd, void* buf, size_t len, int flags) {
    ++socket_reads;
    return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
}
extern "C" ssize_t recvmsg(int fd, msghdr* msg, int flags) {
    ++socket_reads;
    return ::syscall(SYS_recvmsg, fd, msg, flags);
}

namespace {

// A raw legacy client of a libbmi server that has read its first message, so that its
// connection is the one the server's last data came on.
struct RawClient {
    int fd = -1;
    std::shared_ptr<Peer> peer;

    RawClient(Pair& p, int receive_buffer = 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        // Set before connect, so that the window the server sees is small from the start.
        if (receive_buffer > 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
        sockaddr_in sa = loopback(port_from(p.server->listen_address()));
        REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        const std::size_t before = p.server_sink.unexpected.size();
        send_frame(Mode::unexpected, 1);
        REQUIRE(drive({p.server.get()}, [&] { return p.server_sink.unexpected.size() > before; }));
        peer = p.server_sink.unexpected.back().peer;
    }
    ~RawClient() { close(fd); }
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    void send_frame(Mode mode, bmi_msg_tag_t tag) const {
        const auto f = legacy_frame(mode, tag, {'p', 'i', 'n', 'g'});
        REQUIRE(send(fd, f.data(), f.size(), MSG_NOSIGNAL) == ssize_t(f.size()));
    }
};

// Until the server's epoll set has something ready (a poll of the set itself, no epoll_wait).
void await_readable(Method& server) {
    pollfd pfd{server.wait_fd(), POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 5000) == 1);
}

}  // namespace

TEST_CASE("a polling pass reads the last message's connection, and every fourth one looks at "
          "the whole set",
          "[tcp][polling]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    RawClient client(p);
    Method& server = *p.server;
    constexpr int messages = 12;
    int passes = 0;
    int looks = 0;
    for (int i = 0; i < messages; ++i) {
        std::vector<std::uint8_t> in(4);
        auto r = make_op(OpKind::recv, client.peer, 20 + i, in.data(), bmi_size_t(in.size()));
        REQUIRE(post(server, *r) == 0);
        client.send_frame(Mode::eager, 20 + i);
        await_readable(server);
        // A pass right after one whose read emptied the socket skips its read: the message
        // is in after two passes at most.
        for (int pass = 0; pass < 2 && !r->completed; ++pass) {
            const int before = epoll_waits;
            server.progress_polling();
            looks += epoll_waits - before;
            ++passes;
        }
        CHECK(r->completed);
        CHECK(r->error == 0);
        CHECK(r->actual_size == 4);
    }
    // Every fourth pass looks, skipped ones counted: about 3 messages in 4 passes, one a look.
    CHECK(passes >= messages);
    CHECK(passes <= messages / 3 * 4);
    CHECK(looks >= passes / 4);
    CHECK(looks <= passes / 4 + 1);
}

TEST_CASE("the polling pass right after one that emptied the connection makes no system call",
          "[tcp][polling]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    RawClient client(p);
    Method& server = *p.server;
    int quiet_passes = 0;
    for (int i = 0; i < 8; ++i) {
        std::vector<std::uint8_t> in(4);
        auto r = make_op(OpKind::recv, client.peer, 40 + i, in.data(), bmi_size_t(in.size()));
        REQUIRE(post(server, *r) == 0);
        client.send_frame(Mode::eager, 40 + i);
        await_readable(server);
        bool read_by_look = false;
        for (int pass = 0; pass < 2 && !r->completed; ++pass) {
            const int looks_before = epoll_waits;
            server.progress_polling();
            read_by_look = epoll_waits != looks_before;
        }
        REQUIRE(r->completed);
        // The pass after it, with nothing sent: no read, unless a look is due, or the message
        // came in through a look (which leaves the next pass its read).
        const int reads_before = socket_reads;
        const int looks_before = epoll_waits;
        server.progress_polling();
        if (read_by_look || epoll_waits != looks_before) continue;
        CHECK(socket_reads == reads_before);
        ++quiet_passes;
    }
    // Of the 16 or so passes, every fourth looks; each look takes one message out of the count.
    CHECK(quiet_passes >= 4);
}

TEST_CASE("a connection that is not the last one's is served within four polling passes",
          "[tcp][polling]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    RawClient quiet(p);
    RawClient busy(p);  // read last: the connection a polling pass reads first
    Method& server = *p.server;
    const std::size_t before = p.server_sink.unexpected.size();
    quiet.send_frame(Mode::unexpected, 7);
    int passes = 0;
    bool quiet_served = false;
    while (!quiet_served && passes < 8) {
        // The busy client brings a message for every pass, so its read never comes up empty.
        busy.send_frame(Mode::unexpected, 8);
        await_readable(server);
        server.progress_polling();
        ++passes;
        for (std::size_t i = before; i < p.server_sink.unexpected.size(); ++i)
            quiet_served = quiet_served || p.server_sink.unexpected[i].peer == quiet.peer;
    }
    CHECK(quiet_served);
    CHECK(passes <= 4);
}

TEST_CASE("while that connection has output waiting, every polling pass looks at the whole set",
          "[tcp][polling]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    RawClient client(p, 4096);  // a small window, and the client never reads
    Method& server = *p.server;
    // Larger than the socket buffers of both ends together, so that the send cannot leave.
    std::vector<std::uint8_t> big(12 << 20, 0x5a);
    auto s = make_op(OpKind::send, client.peer, 9, big.data(), bmi_size_t(big.size()));
    REQUIRE(post(server, *s) == 0);
    drive(
        {&server}, [] { return false; }, 0.1);
    REQUIRE_FALSE(s->completed);
    const int before = epoll_waits;
    for (int i = 0; i < 3; ++i) server.progress_polling();
    CHECK(epoll_waits - before == 3);
    // The client reads now, and polling passes alone move the rest.
    std::vector<std::uint8_t> sink(1 << 20);
    std::size_t taken = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!s->completed && std::chrono::steady_clock::now() < deadline) {
        const ssize_t n = recv(client.fd, sink.data(), sink.size(), 0);
        if (n > 0) taken += static_cast<std::size_t>(n);
        server.progress_polling();
    }
    CHECK(s->completed);
    CHECK(s->error == 0);
    CHECK(taken > big.size() / 2);
}
