// SPDX-License-Identifier: LGPL-2.1-or-later
// Helpers for the verbs tests: skip without an RDMA device (exit 77, which meson counts as
// SKIP), forked peer processes, and small waits with deadlines.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bmi/core/instance.hpp"
#include "methods/verbs/verbs_method.hpp"

namespace bmi::test::verbs {

// Call at static-initialisation time of each test binary, before Catch runs.
inline bool skip_without_device() {
    std::string reason;
    if (method::verbs::device_available(&reason)) return true;
    std::fprintf(stderr, "SKIP: %s\n", reason.c_str());
    std::_Exit(77);
}

// A child process forked before the parent opens any RDMA device. It reads one line (the
// parent's listen address) from its pipe, runs body(address, report_fd) and exits with what
// body returns; it dies with the parent and is only ever killed by its own pid.
class Child {
public:
    template <class Body>
    explicit Child(Body&& body) {
        int down[2], up[2];
        if (pipe(down) != 0 || pipe(up) != 0) std::abort();
        pid_ = fork();
        if (pid_ < 0) std::abort();
        if (pid_ == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(down[1]);
            close(up[0]);
            std::string address;
            char ch;
            while (read(down[0], &ch, 1) == 1 && ch != '\n') address += ch;
            std::_Exit(body(address, up[1]));
        }
        close(down[0]);
        close(up[1]);
        to_child_ = down[1];
        from_child_ = up[0];
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        close(to_child_);
        close(from_child_);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    void start(const std::string& address) {
        std::string line = address + "\n";
        if (write(to_child_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
            std::abort();
    }
    // The child's next one-byte report, or -1 after timeout_ms.
    int wait_report(int timeout_ms = 30000) {
        pollfd p{from_child_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1) return -1;
        unsigned char byte;
        return read(from_child_, &byte, 1) == 1 ? byte : -1;
    }
    // Exit status once it ends (-1 on timeout or a signal).
    int wait_exit(int timeout_ms = 60000) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            pid_t r = waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                pid_ = -1;
                if (WIFSIGNALED(status))
                    std::fprintf(stderr, "child %d died of signal %d\n", static_cast<int>(r),
                                 WTERMSIG(status));
                return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
            usleep(20000);
        }
        return -1;
    }
    void kill_now() {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    int to_child_ = -1;
    int from_child_ = -1;
};

inline void report(int fd, unsigned char value) {
    ssize_t ignored = write(fd, &value, 1);
    (void)ignored;
}

// A client instance in a child: creates, opens a context and looks the parent up.
struct ChildSide {
    std::unique_ptr<core::Instance> instance;
    bmi_context_id context = -1;
    BMI_addr_t parent = 0;
    int open(const std::string& address) {
        if (core::Instance::create({}, instance) != 0) return 1;
        if (instance->open_context(context) != 0) return 2;
        if (instance->addr_lookup(address, parent) != 0) return 3;
        return 0;
    }
    // Posts and waits; 0 on success, else the error.
    int run(const core::PostRequest& request, int deadline_ms = 60000,
            bmi_size_t* actual = nullptr) {
        bmi_op_id_t id = 0;
        bmi_size_t size = 0;
        int rc = instance->post(request, id, &size);
        if (rc < 0) return rc;
        if (rc == 1) {
            if (actual) *actual = size;
            return 0;
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
        while (std::chrono::steady_clock::now() < deadline) {
            int outcount = 0;
            core::Completion c;
            if (instance->test(id, context, 50, outcount, c) != 0) return -1;
            if (outcount == 1) {
                if (actual) *actual = c.actual_size;
                return c.error;
            }
        }
        return -2;
    }
};

inline core::PostRequest request(method::OpKind kind, BMI_addr_t addr, void* data, bmi_size_t size,
                                 bmi_msg_tag_t tag, bmi_context_id context) {
    core::PostRequest r;
    r.kind = kind;
    r.addr = addr;
    r.buffer = data;
    r.size = size;
    r.tag = tag;
    r.context = context;
    return r;
}

// Receives one unexpected message on a server instance (deadline in ms); outcount 0 if none.
inline int receive_unexpected(core::Instance& server, core::UnexpectedMessage& got,
                              int deadline_ms = 30000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    int outcount = 0;
    while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
        if (server.testunexpected(20, outcount, std::span(&got, 1)) != 0) return 0;
    return outcount;
}

}  // namespace bmi::test::verbs
