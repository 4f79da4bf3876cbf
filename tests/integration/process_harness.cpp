// SPDX-License-Identifier: LGPL-2.1-or-later
// fork/exec children with pipes, and deadline-bound reads and waits through poll and pidfds.
#include "process_harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace bmi::integration {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Runs in the forked child: only async-signal-safe calls until exec, because the test process
// may have other threads. Reports an exec failure's errno through report_fd.
[[noreturn]] void exec_child(char* const* argv, int stdin_fd, int stdout_fd, int report_fd,
                             pid_t parent) {
    // Dies with the test process, even if that is SIGKILLed by Meson's timeout.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);  // an ignored disposition would survive exec
    if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0) {
        int e = errno;
        (void)!write(report_fd, &e, sizeof(e));
        _exit(127);
    }
    execv(argv[0], argv);
    int e = errno;
    (void)!write(report_fd, &e, sizeof(e));
    _exit(127);
}

}  // namespace

Process Process::spawn(const std::vector<std::string>& argv, bool with_stdin) {
    if (argv.empty()) throw std::invalid_argument("spawn: empty argv");
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    // Every descriptor is close-on-exec, so a child never inherits another child's pipes
    // (which would hide end-of-file from us); dup2 onto 0/1 clears the flag for those two.
    int out[2] = {-1, -1}, in[2] = {-1, -1}, report[2] = {-1, -1};
    auto close_all = [&] {
        for (int* fd : {&out[0], &out[1], &in[0], &in[1], &report[0], &report[1]}) close_fd(*fd);
    };
    bool ok = pipe2(out, O_CLOEXEC) == 0 &&
              (with_stdin ? pipe2(in, O_CLOEXEC) == 0
                          : (in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) &&
              pipe2(report, O_CLOEXEC) == 0;
    if (!ok) {
        int e = errno;
        close_all();
        errno = e;
        fail("pipes for " + argv[0]);
    }
    // Writing to a child that died must be an error (EPIPE) here, not a signal that ends the
    // whole test run. The child gets the default back before exec.
    if (with_stdin) ::signal(SIGPIPE, SIG_IGN);

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close_all();
        errno = e;
        fail("fork");
    }
    if (pid == 0) exec_child(args.data(), in[0], out[1], report[1], parent);

    Process p;
    p.pid_ = pid;
    p.out_fd_ = std::exchange(out[0], -1);
    p.in_fd_ = std::exchange(in[1], -1);
    int report_fd = std::exchange(report[0], -1);
    close_all();
    // The report pipe reaches end of file at exec (close-on-exec) or carries exec's errno.
    int child_errno = 0;
    ssize_t n;
    do n = ::read(report_fd, &child_errno, sizeof(child_errno));
    while (n < 0 && errno == EINTR);
    ::close(report_fd);
    if (n > 0) {
        p.reap(0);
        errno = child_errno;
        fail("exec " + argv[0]);
    }
    // Through syscall(): glibc 2.36's <sys/pidfd.h> lacks extern "C" and does not link from C++.
    p.pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (p.pidfd_ < 0) fail("pidfd_open");
    if (p.in_fd_ >= 0) fcntl(p.in_fd_, F_SETFL, O_NONBLOCK);
    return p;
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
    if (this != &other) {
        release();
        pid_ = std::exchange(other.pid_, -1);
        pidfd_ = std::exchange(other.pidfd_, -1);
        out_fd_ = std::exchange(other.out_fd_, -1);
        in_fd_ = std::exchange(other.in_fd_, -1);
        reaped_ = std::exchange(other.reaped_, false);
        status_ = other.status_;
        buffer_ = std::move(other.buffer_);
    }
    return *this;
}

Process::~Process() { release(); }

void Process::release() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        reap(0);
    }
    close_fd(pidfd_);
    close_fd(out_fd_);
    close_fd(in_fd_);
    pid_ = -1;
}

bool Process::reap(int options) {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, options);
    while (r < 0 && errno == EINTR);
    if (r != pid_) return false;
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

bool Process::fill(int timeout_ms) {
    if (out_fd_ < 0) return false;
    pollfd pfd{out_fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, timeout_ms);
    if (r < 0 && errno == EINTR) return true;
    if (r <= 0) return false;
    char chunk[4096];
    ssize_t n = ::read(out_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
        close_fd(out_fd_);  // end of file: the child closed stdout or exited
        return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
}

std::optional<std::string> Process::read_line(milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        auto newline = buffer_.find('\n');
        if (newline != std::string::npos) {
            std::string line = buffer_.substr(0, newline);
            buffer_.erase(0, newline + 1);
            return line;
        }
        if (out_fd_ < 0 || Clock::now() >= deadline) return std::nullopt;
        fill(remaining_ms(deadline));
    }
}

std::optional<std::string> Process::read_address(milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (
        auto line = read_line(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()))) {
        if (line->rfind("ADDR ", 0) == 0) return line->substr(5);
    }
    return std::nullopt;
}

bool Process::write_stdin(std::string_view text) {
    while (!text.empty() && in_fd_ >= 0) {
        ssize_t n = ::write(in_fd_, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;  // EPIPE: the child is gone (or its stdin pipe is full)
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return text.empty();
}

std::optional<int> Process::wait(milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!reaped_) {
        if (reap(WNOHANG)) break;
        int left = remaining_ms(deadline);
        if (left == 0) return std::nullopt;
        pollfd fds[2] = {{pidfd_, POLLIN, 0}, {out_fd_, POLLIN, 0}};
        int r = ::poll(fds, out_fd_ >= 0 ? 2 : 1, left);
        if (r < 0 && errno != EINTR) fail("poll");
        if (r > 0 && out_fd_ >= 0 && fds[1].revents != 0) fill(0);
    }
    // What the child wrote before exiting is still in the pipe.
    while (fill(0)) {
    }
    return status_;
}

void Process::kill(int signal) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, signal);
}

std::string program_from_env(const char* variable) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0')
        throw std::runtime_error(std::string(variable) + " is not set (run through meson test)");
    return value;
}

std::vector<std::string> split_words(std::string_view line) {
    std::vector<std::string> words;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        if (i > start) words.emplace_back(line.substr(start, i - start));
    }
    return words;
}

}  // namespace bmi::integration
