// SPDX-License-Identifier: LGPL-2.1-or-later
// Plain sockets an attack test opens by hand: a blocking TCP connection to "scheme://host:port"
// (tcp, and verbs' bootstrap listener), and a wait for the listener to close it.
#pragma once

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "support/method_address/method_address.hpp"

namespace bmi::test {

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
