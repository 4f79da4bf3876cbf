// SPDX-License-Identifier: LGPL-2.1-or-later
// Opening a file named by a setting (a key file, an allocation file) only if it is a regular
// file, without blocking on one that is not: opening a FIFO that has no writer waits for one.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <string>

namespace bmi::support {

struct OpenedFile {
    int fd = -1;            // open for reading, or -1 when refused
    struct stat status {};  // of fd
    std::string refusal;    // why it was refused; empty when fd is open
    int open_errno = 0;     // errno of open(2) when that is what failed
};

// The caller closes fd.
OpenedFile open_regular_file(const std::string& path);

// Reads from fd until end of file or max bytes into buffer; false on a read error.
bool read_up_to(int fd, void* buffer, std::size_t max, std::size_t& got);

}  // namespace bmi::support
