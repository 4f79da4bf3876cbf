// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/files/regular_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bmi::support {

OpenedFile open_regular_file(const std::string& path) {
    OpenedFile file;
    // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer, and is refused below;
    // reads of a regular file ignore the flag.
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        file.open_errno = errno;
        file.refusal = std::strerror(errno);
        return file;
    }
    if (fstat(fd, &file.status) != 0 || !S_ISREG(file.status.st_mode)) {
        close(fd);
        file.refusal = "not a regular file";
        return file;
    }
    file.fd = fd;
    return file;
}

bool read_up_to(int fd, void* buffer, std::size_t max, std::size_t& got) {
    got = 0;
    while (got < max) {
        const ssize_t n = read(fd, static_cast<char*>(buffer) + got, max - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace bmi::support
