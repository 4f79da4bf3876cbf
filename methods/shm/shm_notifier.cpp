// SPDX-License-Identifier: LGPL-2.1-or-later
// Checking a peer's notifier descriptor (why: shm_notifier.hpp).
#include "methods/shm/shm_notifier.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

#include "bmi-types.h"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// What the kernel calls the file behind fd ("anon_inode:[eventfd]", "pipe:[123]", ...), or ""
// when /proc cannot say.
std::string_view file_kind(int fd, char (&buffer)[64]) {
    char path[48];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, buffer, sizeof buffer - 1);
    return std::string_view(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
}
}  // namespace

int adopt_notifier(int fd, int peer_pid) {
    char buffer[64];
    std::string_view kind = file_kind(fd, buffer);
    struct stat st {};
    // fstat first: a pipe, socket or file is refused even where /proc is not mounted. The
    // name then tells an eventfd from the other anonymous inodes (timerfd, epoll, ...).
    bool eventfd = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == 0 &&
                   kind == "anon_inode:[eventfd]";
    if (!eventfd) {
        BMI_LOG(error,
                "shm: pid %d handed over '%.*s' as its notifier, not an eventfd; "
                "refusing that connection",
                peer_pid, static_cast<int>(kind.size()), kind.data());
        return -BMI_EPROTO;
    }
    // The peer shares this open file and may have made it blocking: a saturated counter
    // would then hang our wake-up writes.
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -BMI_EPROTO;
    return 0;
}

}  // namespace bmi::method::shm
