// SPDX-License-Identifier: LGPL-2.1-or-later
// add_wake_fd: the control layer's fd joins a method's epoll set only under a tag no method
// uses, and is then reported under that tag.
#include <catch2/catch.hpp>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "support/epoll/wake_fd.hpp"

using bmi::support::add_wake_fd;
using bmi::support::wake_tag_floor;

TEST_CASE("a wake fd joins the epoll set only under a tag from 2^63 up, and wakes it") {
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    REQUIRE(epoll_fd >= 0);
    REQUIRE(wake >= 0);
    CHECK_FALSE(add_wake_fd(epoll_fd, wake, wake_tag_floor - 1));  // a method's tag
    REQUIRE(add_wake_fd(epoll_fd, wake, wake_tag_floor + 7));
    CHECK_FALSE(add_wake_fd(epoll_fd, wake, wake_tag_floor + 8));  // already in the set

    epoll_event event{};
    CHECK(epoll_wait(epoll_fd, &event, 1, 0) == 0);
    std::uint64_t one = 1;
    REQUIRE(write(wake, &one, sizeof one) == sizeof one);
    REQUIRE(epoll_wait(epoll_fd, &event, 1, 1000) == 1);
    CHECK(event.data.u64 == wake_tag_floor + 7);
    close(wake);
    close(epoll_fd);
}
