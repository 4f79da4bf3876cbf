// SPDX-License-Identifier: LGPL-2.1-or-later
// Thin POSIX socket helpers: option setup, listen, nonblocking connect, vectored I/O.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bmi-types.h"
#include "methods/method.hpp"
#include "methods/tcp/tcp_address.hpp"
#include "methods/tcp/tcp_source_ports.hpp"

namespace bmi::method::tcp {

// What every connection's socket is given: buffer sizes from BMI_TCP_BUFFER_*_SIZE (0 keeps
// the kernel default) and the silent-peer bound (tcp_silent_peer_timeout_ms, set by start).
struct SocketTuning {
    int send_buffer = 0;
    int receive_buffer = 0;
    std::chrono::milliseconds silent_peer{};
};

// TCP_NODELAY, TCP_USER_TIMEOUT and keepalive (probes 1 s apart from 3 s before the bound)
// for the silent-peer bound, and the buffer sizes. Failures are ignored: every option is an
// optimisation or a faster failure.
void configure_socket(int fd, const SocketTuning& tuning);

// What an allocated plane asks of every socket on it (doc/planes.md); the default asks nothing.
struct SocketPolicy {
    SocketAddress source;      // bind here before connecting; empty: the kernel chooses
    int tos = -1;              // IP_TOS / IPV6_TCLASS byte; -1: untouched
    int priority = -1;         // SO_PRIORITY; -1: untouched
    std::uint64_t pacing = 0;  // SO_MAX_PACING_RATE in bytes per second; 0: unpaced
};
// Applies policy's marks and pacing to fd (not its source); 0, or -BMI_E* naming what the
// kernel refused (the caller decides whether a refusal is fatal).
int apply_policy(int fd, const SocketPolicy& policy);

// A nonblocking listening socket on addr (SO_REUSEADDR); 0 and fd, or -BMI_E*.
int open_listener(const SocketAddress& addr, int& fd);
// Starts a nonblocking connect from policy.source (if set) and a port of ports' range (if one is
// in force) with policy's marks; 0 and fd (completion is signalled by EPOLLOUT), or -BMI_E*.
int start_connect(const SocketAddress& addr, const SocketTuning& tuning, const SocketPolicy& policy,
                  SourcePorts& ports, int& fd);
// The pending error of fd as -BMI_E* (0 if none).
int socket_error(int fd);
// Whether bytes wait in fd unread, and whether fd takes bytes now: what a deadline on the
// peer asks before it closes (TcpMethod::on_deadline), one system call, never per transfer.
bool bytes_unread(int fd);
bool writable_now(int fd);
SocketAddress peer_address(int fd);
SocketAddress local_address(int fd);

// Every transfer passes MSG_DONTWAIT, so none of them blocks whatever the descriptor's mode:
// a connection's socket loses O_NONBLOCK when the method sleeps in its read (read_wait).
// sendmsg with MSG_NOSIGNAL, so a dead peer yields EPIPE rather than SIGPIPE.
ssize_t send_vector(int fd, const iovec* iov, int count);
// wait: block until some bytes come or the socket's SO_RCVTIMEO passes (fd must be in
// blocking mode); an interrupted wait reports EAGAIN rather than starting a new timeout.
ssize_t receive_vector(int fd, const iovec* iov, int count, bool wait = false);
// Puts fd in blocking mode with a receive timeout of about `timeout` for receive_vector's
// waits; the timeout the kernel will keep at most (rounded to its clock tick), or a negative
// -BMI_E* if the socket refused.
std::chrono::microseconds enable_read_wait(int fd, std::chrono::microseconds timeout);

// The iovecs covering bytes [offset, offset + length) of op's segments, at most max entries.
int segment_iov(const Operation& op, bmi_size_t offset, bmi_size_t length, iovec* iov, int max);
// Copies size bytes into op's segments from the start (size <= op.total_size).
void copy_to_segments(const Operation& op, const void* data, bmi_size_t size);

// Largest iovec count handed to one sendmsg/readv (IOV_MAX-aware).
inline constexpr int iov_batch = IOV_MAX < 64 ? IOV_MAX : 64;

}  // namespace bmi::method::tcp
