// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer made of plain POSIX sockets, for tests that speak the tcp wire format by hand: bad
// input, legacy (OrangeFS) framing and hostile peers.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "methods/tcp/tcp_address.hpp"
#include "methods/tcp/tcp_wire.hpp"
#include "tcp_test_harness.hpp"

namespace bmi::method::tcp::test {

inline std::uint16_t port_from(const std::string& address) {
    auto parsed = parse_tcp_address(address);
    REQUIRE(parsed);
    return parsed->port;
}

inline sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

inline int raw_connect(std::uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = loopback(port);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

inline int raw_listen(std::uint16_t& port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = loopback(0);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    REQUIRE(listen(fd, 4) == 0);
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

inline int raw_accept(int listener, Method& m) {
    int fd = -1;
    drive({&m}, [&] { return (fd = accept(listener, nullptr, nullptr)) >= 0; });
    if (fd >= 0) fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

inline bool raw_write(int fd, const void* data, std::size_t size, Method& m) {
    const auto* p = static_cast<const char*>(data);
    std::size_t done = 0;
    return drive({&m}, [&] {
        ssize_t n = send(fd, p + done, size - done, MSG_NOSIGNAL);
        if (n > 0) done += static_cast<std::size_t>(n);
        return done == size;
    });
}

inline bool raw_read(int fd, void* data, std::size_t size, Method& m) {
    auto* p = static_cast<char*>(data);
    std::size_t done = 0;
    return drive({&m},
                 [&] {
                     ssize_t n = recv(fd, p + done, size - done, 0);
                     if (n > 0) done += static_cast<std::size_t>(n);
                     return done == size || n == 0;
                 }) &&
           done == size;
}

// True once the other side has closed fd (EOF or reset).
inline bool raw_closed(int fd, Method& m, double seconds = 5.0) {
    return drive(
        {&m},
        [&] {
            char c;
            ssize_t n = recv(fd, &c, 1, 0);
            return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        },
        seconds);
}

inline std::vector<std::uint8_t> legacy_frame(Mode mode, bmi_msg_tag_t tag,
                                              const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint8_t> frame(legacy_header_size);
    Header h;
    h.mode = mode;
    h.tag = wire_tag(tag);
    h.size = payload.size();
    encode_header(h, Framing::orangefs, frame.data());
    frame.insert(frame.end(), payload.begin(), payload.end());
    return frame;
}

inline Header read_header(int fd, bool v2, Method& m) {
    std::uint8_t buf[max_header_size] = {};
    REQUIRE(raw_read(fd, buf, v2 ? v2_header_size : legacy_header_size, m));
    return decode_header(buf, v2 ? Framing::v2 : Framing::orangefs);
}

// A v2 frame header with no payload (RTS, CTS, NAK) or announcing one (DATA).
inline std::vector<std::uint8_t> v2_frame(Mode mode, bmi_msg_tag_t tag, std::uint64_t size,
                                          std::uint64_t cookie) {
    std::vector<std::uint8_t> frame(v2_header_size);
    Header h;
    h.mode = mode;
    h.tag = wire_tag(tag);
    h.size = size;
    h.cookie = cookie;
    encode_header(h, Framing::v2, frame.data());
    return frame;
}

// Connects to port and completes the v2 handshake announcing `announced` and `features`;
// -1 on failure.
inline int raw_v2_connect(std::uint16_t port, const std::string& announced, Method& m,
                          std::uint64_t features = feature_rendezvous) {
    int fd = raw_connect(port);
    auto hello = encode_hello(Hello{features, announced}, false);
    if (!raw_write(fd, hello.data(), hello.size(), m)) return -1;
    Header ack = read_header(fd, false, m);
    std::vector<std::uint8_t> body(ack.size);
    if (ack.mode != Mode::hello_ack || !raw_read(fd, body.data(), body.size(), m)) return -1;
    return fd;
}

// True if nothing arrives on fd while m runs for `seconds`.
inline bool raw_silent(int fd, Method& m, double seconds = 0.3) {
    bool got = false;
    drive(
        {&m},
        [&] {
            char c;
            got = recv(fd, &c, 1, MSG_PEEK) > 0;
            return got;
        },
        seconds);
    return !got;
}

// Sends one unexpected message on fd, a v2 connection to p's server, and returns the server's
// peer for it.
inline std::shared_ptr<Peer> introduce_v2(int fd, Pair& p) {
    auto frame = v2_frame(Mode::unexpected, 1, 2, 0);
    frame.push_back('h');
    frame.push_back('i');
    const std::size_t before = p.server_sink.unexpected.size();
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return p.server_sink.unexpected.size() > before; }));
    return p.server_sink.unexpected.back().peer;
}

// A client-only tcp method whose one peer is a listening raw socket of the test's.
struct ClientOfRaw {
    std::uint16_t port = 0;
    int listener = raw_listen(port);
    TestSink sink;
    std::unique_ptr<Method> client;
    std::shared_ptr<Peer> peer;

    explicit ClientOfRaw(const Config& config = {}) {
        REQUIRE(create(config, sink, client) == 0);
        REQUIRE(client->lookup("tcp://127.0.0.1:" + std::to_string(port), peer) == 0);
    }
    ~ClientOfRaw() { close(listener); }
    ClientOfRaw(const ClientOfRaw&) = delete;
    ClientOfRaw& operator=(const ClientOfRaw&) = delete;
};

// Accepts raw's connection (a send of the test's brings it up) as a libbmi acceptor: answers
// the upgrade offer on the client's first frame with HELLO_ACK announcing `features`, drops the
// OrangeFS frames written before the client's HELLO (the first among them the test's send)
// and reads that HELLO; returns it, and the socket in fd. v2 frames follow on fd.
inline std::optional<Hello> raw_accept_hello(ClientOfRaw& raw, std::uint64_t features, int& fd) {
    fd = raw_accept(raw.listener, *raw.client);
    REQUIRE(fd >= 0);
    bool answered = false;
    while (true) {
        Header h = read_header(fd, false, *raw.client);
        std::vector<std::uint8_t> body(h.size);
        REQUIRE(raw_read(fd, body.data(), body.size(), *raw.client));
        if (h.magic == hello_magic) {
            REQUIRE(h.mode == Mode::hello);
            if (!answered) {  // a first send only v2 carries opens with HELLO
                auto ack = encode_hello(Hello{features, ""}, true);
                REQUIRE(raw_write(fd, ack.data(), ack.size(), *raw.client));
            }
            return decode_hello_body(body);
        }
        REQUIRE(h.magic == wire_magic);
        if (!answered) {
            REQUIRE(offers_upgrade(h));
            auto ack = encode_hello(Hello{features, ""}, true);
            REQUIRE(raw_write(fd, ack.data(), ack.size(), *raw.client));
            answered = true;
        }
    }
}

}  // namespace bmi::method::tcp::test
