// SPDX-License-Identifier: LGPL-2.1-or-later
// The TCP sockets this process holds, read from /proc: which ports it listens on, and the
// open sockets themselves (so a test can read the options libbmi set on them).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bmi::test {

struct OpenSocket {
    int fd;
    std::uint16_t local_port;
    std::uint16_t remote_port;  // 0 for a listener
};

// Ports of this process's listening TCP sockets (IPv4 and IPv6), sorted.
std::vector<std::uint16_t> listening_ports();
// This process's connected TCP sockets.
std::vector<OpenSocket> connected_sockets();
// n ports the kernel had free a moment ago on 127.0.0.1 and ::1 alike.
std::vector<std::uint16_t> free_ports(int n);
// "p1,p2,...": the allocation text's port list.
std::string port_list(const std::vector<std::uint16_t>& ports);

}  // namespace bmi::test
