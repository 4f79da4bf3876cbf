// SPDX-License-Identifier: LGPL-2.1-or-later
// What this process holds of the kernel's, so a test can show a dropped connection left
// nothing behind: open descriptors, and shm segments and doorbells still mapped.
#pragma once

#include <dirent.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace bmi::test {

inline std::size_t open_descriptors() {
    std::size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

// Mappings of the memfds shm creates for its segments and doorbells ("libbmi-shm...").
inline std::size_t shm_mappings() {
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:libbmi-shm") != std::string::npos;
    return n;
}

}  // namespace bmi::test
