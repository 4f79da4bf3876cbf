// SPDX-License-Identifier: LGPL-2.1-or-later
// The control layer's wake-up fd in a method's own epoll set (Method::accept_wake_fd): a test
// call that sleeps then waits on that one set instead of nesting it in another.
#pragma once

#include <cstdint>

namespace bmi::support {

// The control layer tags its fds from 2^63 up and a method keeps its own tags below, so one
// look at an event's tag says whose it is.
inline constexpr std::uint64_t wake_tag_floor = std::uint64_t{1} << 63;

// Adds fd to epoll_fd, readable, under tag. False, nothing added, for a tag below
// wake_tag_floor (it could be taken for one of the method's) or when epoll_ctl fails.
bool add_wake_fd(int epoll_fd, int fd, std::uint64_t tag);

}  // namespace bmi::support
