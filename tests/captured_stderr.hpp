// SPDX-License-Identifier: LGPL-2.1-or-later
// Captures what the library writes to stderr (its always-on warnings) for a test to check.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace bmi::test {

// Sends this process's stderr to a temporary file until stop(); restores it on every path.
class CapturedStderr {
public:
    CapturedStderr() : file_(std::tmpfile()), saved_(dup(STDERR_FILENO)) {
        REQUIRE(file_ != nullptr);
        REQUIRE(saved_ >= 0);
        REQUIRE(dup2(fileno(file_), STDERR_FILENO) >= 0);
    }
    ~CapturedStderr() {
        restore();
        if (file_ != nullptr) std::fclose(file_);
    }
    CapturedStderr(const CapturedStderr&) = delete;
    CapturedStderr& operator=(const CapturedStderr&) = delete;

    std::string stop() {
        restore();
        std::string text;
        std::rewind(file_);
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) text.append(buf, n);
        return text;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        dup2(saved_, STDERR_FILENO);
        close(saved_);
        saved_ = -1;
    }
    std::FILE* file_;
    int saved_;
};

}  // namespace bmi::test
