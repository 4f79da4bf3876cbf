// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/epoll/wake_fd.hpp"

#include <sys/epoll.h>

namespace bmi::support {

bool add_wake_fd(int epoll_fd, int fd, std::uint64_t tag) {
    if (tag < wake_tag_floor) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace bmi::support
