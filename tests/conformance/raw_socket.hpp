// SPDX-License-Identifier: LGPL-2.1-or-later
// Plain sockets an attack test opens by hand: a blocking TCP connection to "scheme://host:port"
// (tcp, and verbs' bootstrap listener), a wait for the listener to close it, and a listener
// on the loopback standing where a peer should be.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "support/method_address/method_address.hpp"

namespace bmi::test {

// A TCP socket bound to 127.0.0.1 at a port the kernel picks, stored in `port`, and listening
// unless `listening` is false (then every connection to it is reset); or -1. `flags` join
// socket()'s type (SOCK_NONBLOCK for a listener that an Acceptor drains). A `wanted` port is
// bound instead, one a server of the test has just left (SO_REUSEADDR).
inline int bind_on_loopback(std::uint16_t& port, int flags = 0, bool listening = true,
                            std::uint16_t wanted = 0) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0) return -1;
    const int yes = 1;
    if (wanted != 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0) {
        close(fd);
        return -1;
    }
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(wanted);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof at;
    if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
        (listening && listen(fd, 64) != 0) ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&at), &length) != 0) {
        close(fd);
        return -1;
    }
    port = ntohs(at.sin_port);
    return fd;
}

inline int listen_on_loopback(std::uint16_t& port, int flags = 0) {
    return bind_on_loopback(port, flags);
}

// A blocking TCP socket connected to host:port of "scheme://host:port", or -1.
inline int connect_to(const std::string& address) {
    auto parts = support::split_scheme(address);
    auto hp = parts ? support::parse_host_port(parts->rest) : std::nullopt;
    if (!hp) return -1;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    if (getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

// True once the other end has closed fd (EOF or reset) within the deadline; what it sent
// meanwhile is read and dropped.
inline bool closed_within(int fd, int deadline_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
        char scratch[256];
        if (recv(fd, scratch, sizeof scratch, 0) <= 0) return true;
    }
}

}  // namespace bmi::test
