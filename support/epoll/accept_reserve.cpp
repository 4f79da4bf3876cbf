// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/epoll/accept_reserve.hpp"

#include <cerrno>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace bmi::support {

AcceptReserve::~AcceptReserve() {
    if (fd_ >= 0) close(fd_);
}

void AcceptReserve::keep() {
    if (fd_ < 0) fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

AcceptReserve::Shed AcceptReserve::shed(int listen_fd, const std::function<void(int)>& answer) {
    if (fd_ < 0) return Shed::no_reserve;
    close(fd_);
    fd_ = -1;
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    const int error = errno;
    if (fd >= 0) {
        if (answer) answer(fd);
        close(fd);
    }
    keep();
    if (fd >= 0) return Shed::took_one;
    if (error == EAGAIN || error == EWOULDBLOCK || error == ECONNABORTED) return Shed::none_waiting;
    // Another thread took the freed slot before our accept: no reserve now, or only if its
    // descriptor was closed since.
    return held() ? Shed::none_waiting : Shed::no_reserve;
}

}  // namespace bmi::support
