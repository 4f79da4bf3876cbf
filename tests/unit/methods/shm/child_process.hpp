// SPDX-License-Identifier: LGPL-2.1-or-later
// A forked child process for shm tests that need a real second process. Fork it before the
// test starts any thread. The child dies with the parent (PR_SET_PDEATHSIG) and is only ever
// killed by its own pid; it reports to the parent one byte at a time through a pipe.
#pragma once

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "harness.hpp"

namespace bmi::test {

// A forked child running `body`; the destructor kills and reaps it if it is still there.
class Child {
public:
    template <class Body>
    explicit Child(Body&& body) {
        int to_parent[2], to_child[2];
        REQUIRE(pipe(to_parent) == 0);
        REQUIRE(pipe(to_child) == 0);
        pid_ = fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(to_parent[0]);
            close(to_child[1]);
            // body parks through the callable it gets, so what it created stays alive; it
            // never returns into Catch's exit path.
            auto park = [&] {
                char byte;
                while (read(to_child[0], &byte, 1) < 0) {
                }
            };
            int rc = body(to_parent[1], park);
            park();
            _exit(rc);
        }
        close(to_parent[1]);
        close(to_child[0]);
        from_child_ = to_parent[0];
        to_child_ = to_child[1];
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        close(from_child_);
        close(to_child_);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    // Waits (bounded) for the child's one-byte report; returns it or -1.
    int wait_report(int timeout_ms = 10000) {
        pollfd p{from_child_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1) return -1;
        unsigned char byte;
        return read(from_child_, &byte, 1) == 1 ? byte : -1;
    }
    // Wakes the child from a park() (one byte).
    void tell() {
        const unsigned char go = 1;
        REQUIRE(write(to_child_, &go, 1) == 1);
    }
    void kill_now() {
        REQUIRE(kill(pid_, SIGKILL) == 0);
        REQUIRE(waitpid(pid_, nullptr, 0) == pid_);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    int from_child_ = -1;
    int to_child_ = -1;
};

// Sends the parent one report byte (from the child).
inline void report(int fd, unsigned char value) {
    ssize_t ignored = write(fd, &value, 1);
    (void)ignored;
}

// A client child that introduces itself with an unexpected message and then runs `rest`
// with its instance, context and the server's address.
template <class Rest>
Child client_child(const std::string& listen, Rest&& rest) {
    return Child([listen, rest](int to_parent, auto&& park) {
        std::unique_ptr<core::Instance> client;
        Side side;
        BMI_addr_t server = 0;
        if (core::Instance::create({}, client) != 0) return 1;
        side.instance = std::move(client);
        if (side.instance->open_context(side.context) != 0 ||
            side.instance->addr_lookup(listen, server) != 0)
            return 1;
        int hello = 42;
        bmi_op_id_t id = 0;
        auto send = unexpected_request(side, server, &hello, sizeof hello, 1);
        if (side.instance->post(send, id, nullptr) != 1) return 2;  // fits the ring
        int rc = rest(to_parent, side, server);
        park();
        return rc;
    });
}

}  // namespace bmi::test
