// SPDX-License-Identifier: LGPL-2.1-or-later
// Child processes for integration tests: every wait has a deadline, and only our own children
// are ever signalled (by pid, never by name).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::integration {

using std::chrono::milliseconds;

// One spawned child. stdout is a pipe to us; stderr is inherited, so the child's diagnostics
// land in the test log; stdin is a pipe when asked for, /dev/null otherwise. The child gets
// SIGKILL if the test process dies first (PR_SET_PDEATHSIG), and from the destructor if it is
// still running then.
class Process {
public:
    // Throws std::runtime_error if the program cannot be started.
    static Process spawn(const std::vector<std::string>& argv, bool with_stdin = false);

    Process(Process&& other) noexcept;
    Process& operator=(Process&& other) noexcept;
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    ~Process();

    pid_t pid() const { return pid_; }

    // The next stdout line without its newline; nullopt at end of file or at the deadline.
    std::optional<std::string> read_line(milliseconds timeout);
    // Reads lines until one starts with "ADDR " and returns the rest of it.
    std::optional<std::string> read_address(milliseconds timeout);
    // Writes to the child's stdin (spawned with_stdin); false if the child is gone.
    bool write_stdin(std::string_view text);

    // Exit code, or 128 + signal number; nullopt if still running at the deadline. Keeps
    // draining stdout meanwhile, so a chatty child cannot block on a full pipe.
    std::optional<int> wait(milliseconds timeout);
    // stdout read so far (after wait: all of it) that read_line has not consumed.
    const std::string& unread_output() const { return buffer_; }

    // Signals this child only, and only while it has not been reaped.
    void kill(int signal);

private:
    Process() = default;
    void release();
    bool fill(int timeout_ms);  // one poll + read; false at end of file or deadline
    bool reap(int options);

    pid_t pid_ = -1;
    int pidfd_ = -1;  // readable once the child has exited
    int out_fd_ = -1;
    int in_fd_ = -1;
    bool reaped_ = false;
    int status_ = 0;
    std::string buffer_;
};

// The path a test's meson.build put into the environment, e.g. BMI_PVFS_SERVER.
// Throws std::runtime_error if it is unset, so a misconfigured test fails loudly.
std::string program_from_env(const char* variable);

// Splits on whitespace.
std::vector<std::string> split_words(std::string_view line);

}  // namespace bmi::integration
