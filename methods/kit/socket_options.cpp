// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/kit/socket_options.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace bmi::method::kit {

void set_socket_int(int fd, int level, int name, int value) {
    (void)setsockopt(fd, level, name, &value, sizeof value);
}

void bound_silence(int fd, std::chrono::milliseconds bound) {
    const auto bound_ms = static_cast<int>(bound.count());
    set_socket_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    set_socket_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, std::max(1, bound_ms / 1000 - 3));
    set_socket_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, 1);
    set_socket_int(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
    set_socket_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, bound_ms);
}

}  // namespace bmi::method::kit
