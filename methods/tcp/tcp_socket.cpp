// SPDX-License-Identifier: LGPL-2.1-or-later
// Socket helpers for the tcp method.
#include "methods/tcp/tcp_socket.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "methods/kit/socket_options.hpp"
#include "support/error/error_map.hpp"

namespace bmi::method::tcp {

namespace {
int new_socket(int family, int& fd) {
    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? support::bmi_error_from_errno(errno) : 0;
}
}  // namespace

void configure_socket(int fd, const SocketTuning& tuning) {
    kit::set_socket_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    // A silently dead peer must fail its operations in bounded time (SPEC §1).
    kit::bound_silence(fd, tuning.silent_peer);
    if (tuning.send_buffer > 0) kit::set_socket_int(fd, SOL_SOCKET, SO_SNDBUF, tuning.send_buffer);
    if (tuning.receive_buffer > 0)
        kit::set_socket_int(fd, SOL_SOCKET, SO_RCVBUF, tuning.receive_buffer);
}

int open_listener(const SocketAddress& addr, int& fd) {
    if (int rc = new_socket(addr.family(), fd); rc < 0) return rc;
    kit::set_socket_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    // The IPv6 wildcard also takes IPv4 clients, whatever the system's bindv6only default.
    if (addr.family() == AF_INET6) kit::set_socket_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
    // OrangeFS's bmi_tcp listens with 256: a server restart is met by every client at once.
    if (bind(fd, addr.get(), addr.length) < 0 || listen(fd, 256) < 0) {
        const int rc = support::bmi_error_from_errno(errno);
        close(fd);
        fd = -1;
        return rc;
    }
    return 0;
}

int apply_policy(int fd, const SocketPolicy& policy) {
    auto set = [fd](int level, int name, auto value) {
        return setsockopt(fd, level, name, &value, sizeof value) == 0
                   ? 0
                   : support::bmi_error_from_errno(errno);
    };
    int rc = 0;
    if (policy.tos >= 0) {
        const SocketAddress local = local_address(fd);
        rc = local.family() == AF_INET6 ? set(IPPROTO_IPV6, IPV6_TCLASS, policy.tos)
                                        : set(IPPROTO_IP, IP_TOS, policy.tos);
    }
    if (rc == 0 && policy.priority >= 0) rc = set(SOL_SOCKET, SO_PRIORITY, policy.priority);
    // The kernel takes the rate as an unsigned long since 4.20 (32 bits before): pass 64.
    if (rc == 0 && policy.pacing > 0)
        rc = set(SOL_SOCKET, SO_MAX_PACING_RATE, static_cast<unsigned long>(policy.pacing));
    return rc;
}

int start_connect(const SocketAddress& addr, const SocketTuning& tuning, const SocketPolicy& policy,
                  SourcePorts& ports, int& fd) {
    if (int rc = new_socket(addr.family(), fd); rc < 0) return rc;
    configure_socket(fd, tuning);
    int rc = apply_policy(fd, policy);
    if (rc == 0) rc = ports.bind_source(fd, addr, policy.source);
    if (rc < 0) {
        close(fd);
        fd = -1;
        return rc;
    }
    if (connect(fd, addr.get(), addr.length) < 0 && errno != EINPROGRESS) {
        const int rc = support::bmi_error_from_errno(errno);
        close(fd);
        fd = -1;
        return rc;
    }
    return 0;
}

int socket_error(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    return support::bmi_error_from_errno(err);
}

bool bytes_unread(int fd) {
    int bytes = 0;
    return ioctl(fd, FIONREAD, &bytes) == 0 && bytes > 0;
}

bool writable_now(int fd) {
    pollfd p{fd, POLLOUT, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
}

SocketAddress peer_address(int fd) {
    SocketAddress out;
    out.length = sizeof out.storage;
    if (getpeername(fd, out.get(), &out.length) < 0) out.length = 0;
    return out;
}

SocketAddress local_address(int fd) {
    SocketAddress out;
    out.length = sizeof out.storage;
    if (getsockname(fd, out.get(), &out.length) < 0) out.length = 0;
    return out;
}

// One piece goes through send() and recv(), which cost less per call than sendmsg() and
// readv() with the same bytes (doc/perf/code-figures.md).
ssize_t send_vector(int fd, const iovec* iov, int count) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<std::size_t>(count);
    ssize_t n;
    do {
        n = count == 1 ? send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT)
                       : sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t receive_vector(int fd, const iovec* iov, int count, bool wait) {
    const int flags = wait ? 0 : MSG_DONTWAIT;
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<std::size_t>(count);
    for (;;) {
        const ssize_t n = count == 1 ? recv(fd, iov[0].iov_base, iov[0].iov_len, flags)
                                     : recvmsg(fd, &msg, flags);
        if (n >= 0 || errno != EINTR) return n;
        if (wait) {
            errno = EAGAIN;
            return -1;
        }
    }
}

std::chrono::microseconds enable_read_wait(int fd, std::chrono::microseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1'000'000),
               static_cast<suseconds_t>(timeout.count() % 1'000'000)};
    socklen_t length = sizeof tv;
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &length) < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        return std::chrono::microseconds(support::bmi_error_from_errno(errno));
    // The kernel keeps whole ticks and may end the wait up to one tick after that: the value
    // read back is the rounded timeout, and the tick is at most that much again.
    const std::chrono::microseconds kept(std::int64_t{tv.tv_sec} * 1'000'000 + tv.tv_usec);
    return 2 * kept;
}

int segment_iov(const Operation& op, bmi_size_t offset, bmi_size_t length, iovec* iov, int max) {
    int n = 0;
    for (int i = 0; i < op.segment_count && n < max && length > 0; ++i) {
        const Segment& s = op.segments[i];
        if (offset >= s.size) {
            offset -= s.size;
            continue;
        }
        const bmi_size_t take = std::min(s.size - offset, length);
        iov[n].iov_base = static_cast<char*>(s.data) + offset;
        iov[n].iov_len = static_cast<std::size_t>(take);
        ++n;
        length -= take;
        offset = 0;
    }
    return n;
}

void copy_to_segments(const Operation& op, const void* data, bmi_size_t size) {
    const auto* src = static_cast<const char*>(data);
    for (int i = 0; i < op.segment_count && size > 0; ++i) {
        const bmi_size_t take = std::min(op.segments[i].size, size);
        if (take > 0) std::memcpy(op.segments[i].data, src, static_cast<std::size_t>(take));
        src += take;
        size -= take;
    }
}

}  // namespace bmi::method::tcp
