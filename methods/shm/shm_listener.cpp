// SPDX-License-Identifier: LGPL-2.1-or-later
// Abstract Unix sockets and SCM_RIGHTS for the shm connection setup.
#include "methods/shm/shm_listener.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bmi-types.h"
#include "methods/shm/shm_wire.hpp"
#include "support/error/error_map.hpp"
#include "support/local_socket/abstract_address.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// Names are at most max_name_length bytes, so the address always fits.
support::AbstractAddress listener_address(std::string_view name) {
    return support::abstract_address(support::shm_listener_socket_name(name))
        .value_or(support::AbstractAddress{});
}

int new_socket() { return socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

// Any local process may bind an abstract name first (there are no file permissions on it):
// says who holds ours, as far as a connection can learn (SO_PEERCRED gives the credentials
// the holder had when it called listen), so the user can find the squatter.
void log_holder(std::string_view name, const support::AbstractAddress& at) {
    const sockaddr_un& address = at.address;
    int s = new_socket();
    ucred holder{};
    socklen_t size = sizeof holder;
    bool known = s >= 0 &&
                 connect(s, reinterpret_cast<const sockaddr*>(&address), at.length) == 0 &&
                 getsockopt(s, SOL_SOCKET, SO_PEERCRED, &holder, &size) == 0;
    if (s >= 0) close(s);
    if (known)
        BMI_LOG(error,
                "shm: cannot listen on '%.*s': abstract socket '@%s' is held by pid %d uid %u",
                static_cast<int>(name.size()), name.data(), address.sun_path + 1,
                static_cast<int>(holder.pid), static_cast<unsigned>(holder.uid));
    else
        BMI_LOG(error,
                "shm: cannot listen on '%.*s': abstract socket '@%s' is bound by "
                "another process (not accepting, so its owner is unknown)",
                static_cast<int>(name.size()), name.data(), address.sun_path + 1);
}

void log_refusal(std::string_view name, int error) {
    BMI_LOG(error, "shm: cannot listen on '%.*s': %s", static_cast<int>(name.size()), name.data(),
            std::strerror(error));
}
}  // namespace

namespace {
// 0 and fd, or the errno of bind or listen.
int bind_and_listen(const support::AbstractAddress& at, int& fd) {
    // A name too long to fit was refused by the wire rules before it came here.
    if (at.length == 0) return ENAMETOOLONG;
    int s = new_socket();
    if (s < 0) return errno;
    if (bind(s, reinterpret_cast<const sockaddr*>(&at.address), at.length) != 0 ||
        listen(s, 128) != 0) {
        int e = errno;
        close(s);
        return e;
    }
    fd = s;
    return 0;
}
}  // namespace

int listen_on(std::string_view name, int& fd) {
    const support::AbstractAddress address = listener_address(name);
    int e = bind_and_listen(address, fd);
    if (e == EADDRINUSE)
        log_holder(name, address);
    else if (e != 0)
        log_refusal(name, e);
    return e == 0 ? 0 : support::bmi_error_from_errno(e);
}

int listen_on_free_port(std::string_view base, int& fd, std::string& chosen) {
    // The dynamic range of IANA ports, entered at a point that differs per process so that
    // servers started together rarely try the same names.
    constexpr unsigned first = 49152, count = 65536 - first;
    const unsigned start = static_cast<unsigned>(getpid()) % count;
    for (unsigned i = 0; i < count; ++i) {
        std::string name(base);
        name += ':';
        name += std::to_string(first + (start + i) % count);
        int e = bind_and_listen(listener_address(name), fd);
        if (e == 0) {
            chosen = std::move(name);
            return 0;
        }
        if (e != EADDRINUSE) {
            log_refusal(name, e);
            return support::bmi_error_from_errno(e);
        }
    }
    BMI_LOG(error, "shm: no free port for '%.*s'", static_cast<int>(base.size()), base.data());
    return -BMI_EADDRINUSE;
}

int connect_to(std::string_view name, int& fd, ConnectStart& how) {
    const support::AbstractAddress address = listener_address(name);
    if (address.length == 0) return -BMI_EINVAL;
    int s = new_socket();
    if (s < 0) return support::bmi_error_from_errno(errno);
    how = ConnectStart::connected;
    if (connect(s, reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) {
        int e = errno;
        if (e == EINPROGRESS) {
            how = ConnectStart::in_progress;
        } else {
            close(s);
            // On a Unix socket EAGAIN is a full backlog, not a connect under way: the
            // kernel queued nothing, so no writability will ever report an outcome.
            if (e == EAGAIN) {
                how = ConnectStart::backlog_full;
                return 0;
            }
            BMI_LOG(shm, "connect to '%.*s': %s", static_cast<int>(name.size()), name.data(),
                    std::strerror(e));
            return e == ENOENT || e == ECONNREFUSED ? -BMI_ECONNREFUSED
                                                    : support::bmi_error_from_errno(e);
        }
    }
    fd = s;
    return 0;
}

int connect_result(int fd) {
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error == 0) return 0;
    return error == ENOENT ? -BMI_ECONNREFUSED : support::bmi_error_from_errno(error);
}

bool peer_is_same_user(int fd, pid_t& pid) {
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return false;
    pid = credentials.pid;
    return credentials.uid == getuid();
}

long send_with_fds(int fd, const void* data, std::size_t size, const int* fds, int fd_count) {
    iovec iov{const_cast<void*>(data), size};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(max_passed_fds * sizeof(int))];
    if (fd_count > max_passed_fds) return -EINVAL;
    if (fd_count > 0) {
        std::memset(control, 0, sizeof control);
        message.msg_control = control;
        message.msg_controllen = CMSG_SPACE(static_cast<std::size_t>(fd_count) * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(static_cast<std::size_t>(fd_count) * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds, static_cast<std::size_t>(fd_count) * sizeof(int));
    }
    ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
    return n < 0 ? -errno : static_cast<long>(n);
}

void send_refusal(int fd, int status) {
    HelloReply reply{};
    reply.magic = hello_magic;
    reply.version = protocol_version;
    reply.pid = static_cast<std::int32_t>(getpid());
    reply.status = status;
    send_with_fds(fd, &reply, sizeof reply, nullptr, 0);
}

long receive_with_fds(int fd, void* data, std::size_t size, int* fds, int max_fds, int& fd_count) {
    fd_count = 0;
    iovec iov{data, size};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(max_passed_fds * sizeof(int))];
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (n < 0) return -errno;
    int installed = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int received;
            std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
            ++installed;
            // Never leak a descriptor a misbehaving peer sent beyond what we asked for.
            if (fd_count < max_fds)
                fds[fd_count++] = received;
            else
                close(received);
        }
    }
    // The kernel installs descriptors until one fails and flags the rest as cut off. Short of
    // the room we gave it, that was our full table (a peer sending more than max_passed_fds
    // fills the room instead): without the rest, what did arrive is of no use.
    if ((message.msg_flags & MSG_CTRUNC) != 0 && installed < max_passed_fds) {
        for (int i = 0; i < fd_count; ++i) close(fds[i]);
        fd_count = 0;
        return -EMFILE;
    }
    return static_cast<long>(n);
}

int epoll_set(int epoll_fd, int op, int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    return epoll_ctl(epoll_fd, op, fd, &ev) == 0 ? 0 : support::bmi_error_from_errno(errno);
}

}  // namespace bmi::method::shm
