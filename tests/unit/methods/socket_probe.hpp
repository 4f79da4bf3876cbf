// SPDX-License-Identifier: LGPL-2.1-or-later
// A test's look at the TCP sockets of its own process, where both ends of a loopback
// connection live: which descriptor has a port, and the options a method set on it.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdint>

namespace bmi::test {

// The port of fd's own end (local) or of the other end; 0 if it has none (not connected).
inline std::uint16_t port_of(int fd, bool local) {
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    const int rc = local ? getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                         : getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    if (rc != 0) return 0;
    if (sa.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(sa).sin_port);
    if (sa.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6&>(sa).sin6_port);
    return 0;
}

// The connected TCP descriptor of this process with `port` at its own end (local) or at the
// other end; -1 if none.
inline int socket_with_port(std::uint16_t port, bool local) {
    for (int fd = 0; fd < 1024; ++fd)
        if (port_of(fd, false) != 0 && port_of(fd, local) == port) return fd;
    return -1;
}

inline int tcp_option(int fd, int name) {
    int value = -1;
    socklen_t len = sizeof value;
    REQUIRE(getsockopt(fd, IPPROTO_TCP, name, &value, &len) == 0);
    return value;
}

}  // namespace bmi::test
