// SPDX-License-Identifier: LGPL-2.1-or-later
// Unix stream sockets in the abstract namespace: listening, connecting, credential checks and
// passing descriptors. The socket only carries the connection hello and tells each side when
// the other is gone (hang-up); messages travel through the shared rings.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bmi::method::shm {

// Binds and listens on "\0libbmi-shm.<uid>.<name>". 0 and fd set, -BMI_EADDRINUSE if another
// live instance holds the name, other -BMI_E* otherwise; a failure is logged here, with its
// cause. No filesystem object is created, so a crashed listener leaves nothing behind and a
// restarted one binds again.
int listen_on(std::string_view name, int& fd);
// Listens on "BASE:PORT" for a free PORT: 0 with fd and the name taken, -BMI_EADDRINUSE when
// every port is held. For a listen address that asks for any port ("shm://host:0").
int listen_on_free_port(std::string_view base, int& fd, std::string& chosen);

enum class ConnectStart : std::uint8_t {
    connected,     // fd is connected (queued on the listener)
    in_progress,   // EINPROGRESS: wait for writability, then check with connect_result
    backlog_full,  // EAGAIN: the listener's backlog is full; nothing started, no fd: try again
};

// Nonblocking connect to the listener `name`: 0 and `how` (fd set unless backlog_full), or
// -BMI_ECONNREFUSED when nobody listens there, or another -BMI_E*.
int connect_to(std::string_view name, int& fd, ConnectStart& how);
// Outcome of an in-progress connect: 0 or -BMI_E*.
int connect_result(int fd);

// True if the process at the other end runs as our uid; sets pid to its pid.
bool peer_is_same_user(int fd, pid_t& pid);

// The most descriptors one message carries (a hello has three: segment, eventfd, doorbell);
// receive_with_fds reads up to this many in one go and closes any beyond what it was asked for.
inline constexpr int max_passed_fds = 4;

// Tells a connecting client that we refuse it, and why (a HelloReply with that status, no
// descriptors); nothing is read first and a failure to send is ignored.
void send_refusal(int fd, int status);

// epoll_ctl(op) of fd in epoll_fd, for events, with the tag progress looks up; 0 or -BMI_E*.
int epoll_set(int epoll_fd, int op, int fd, std::uint32_t events, std::uint64_t tag);

// One datagram-like message with descriptors on a stream socket (at most max_passed_fds).
// Returns bytes sent, or -errno.
long send_with_fds(int fd, const void* data, std::size_t size, const int* fds, int fd_count);
// Receives up to size bytes and up to max_fds descriptors (close-on-exec). Returns bytes (0 on
// end of stream) or -errno; fd_count says how many descriptors arrived. -EMFILE: the message
// was consumed but the kernel could not give us all its descriptors, because our descriptor
// table is full; none is kept (what did arrive is closed).
long receive_with_fds(int fd, void* data, std::size_t size, int* fds, int max_fds, int& fd_count);

}  // namespace bmi::method::shm
