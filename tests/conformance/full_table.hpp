// SPDX-License-Identifier: LGPL-2.1-or-later
// A process whose descriptor table is full, for tests of what a listener does then (tcp, shm,
// the verbs bootstrap): the soft limit is lowered to just above what is open now, so the fill
// is short, and everything is given back when the FullTable goes.
#pragma once

#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace bmi::test {

// Fills this process's descriptor table but for `spare` slots, under a soft limit lowered to
// just above the descriptors open now (so the fill is short); gives everything back when it
// goes.
class FullTable {
public:
    explicit FullTable(int spare) {
        REQUIRE(getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        rlimit low = saved_;
        low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, highest_open() + 64);
        REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
        for (int fd; (fd = dup(STDERR_FILENO)) >= 0;) held_.push_back(fd);
        REQUIRE(errno == EMFILE);
        for (int i = 0; i < spare; ++i) {
            close(held_.back());
            held_.pop_back();
        }
    }
    ~FullTable() {
        for (int fd : held_) close(fd);
        setrlimit(RLIMIT_NOFILE, &saved_);
    }
    FullTable(const FullTable&) = delete;
    FullTable& operator=(const FullTable&) = delete;

private:
    static rlim_t highest_open() {
        rlim_t highest = 0;
        DIR* dir = opendir("/proc/self/fd");
        REQUIRE(dir != nullptr);
        while (dirent* entry = readdir(dir))
            highest = std::max<rlim_t>(highest, std::strtoul(entry->d_name, nullptr, 10));
        closedir(dir);
        return highest;
    }

    rlimit saved_{};
    std::vector<int> held_;
};

}  // namespace bmi::test
