// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared peer rule (peer_rules_test.cpp): a resolver that never answers holds up nothing but
// its own lookup.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "attacker.hpp"
#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;
// A resolver that never answers. A lookup of a host name waits for its resolver with
// no lock held, so every other operation of the instance goes on meanwhile.

namespace {

constexpr int resolver_timeout_s = 5;

enum Outcome : int { served = 0, stalled = 1, resolver_answered = 2, no_private_resolver = 3 };

// A UDP socket on a loopback address of its own that swallows every query, or -1. Tests run
// in parallel (the two dialects' suites run this same case), so each takes a free address of
// 127/8, which all reach this host, rather than sharing 127.0.0.1:53.
int silent_dns_socket(in_addr& address) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const auto pid = static_cast<std::uint32_t>(getpid());
    for (std::uint32_t attempt = 0; attempt < 64; ++attempt) {
        const std::uint32_t host = (pid + attempt * 7919) % 0xFFFE + 1;  // never .0.0
        address.s_addr = htonl((127u << 24) | (53u << 16) | host);
        sockaddr_in at{};
        at.sin_family = AF_INET;
        at.sin_port = htons(53);
        at.sin_addr = address;
        if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0) return fd;
        if (errno != EADDRINUSE) break;
    }
    close(fd);
    return -1;
}

// This process's resolv.conf names a resolver that never answers (silent_dns_socket). Returns
// its socket, or -1. Nothing outside this process sees either.
int unanswering_resolver() {
    if (unshare(CLONE_NEWNS) != 0) return -1;
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return -1;
    in_addr address{};
    const int fd = silent_dns_socket(address);
    if (fd < 0) return -1;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &address, text, sizeof text);
    char dir[] = "/tmp/bmi-resolver-XXXXXX";
    bool mounted = mkdtemp(dir) != nullptr;
    if (mounted) {
        const std::string conf = std::string(dir) + "/resolv.conf";
        FILE* f = std::fopen(conf.c_str(), "w");
        bool written = f != nullptr;
        if (f != nullptr) {
            written = std::fprintf(f, "nameserver %s\noptions timeout:%d attempts:1\n", text,
                                   resolver_timeout_s) > 0;
            written = std::fclose(f) == 0 && written;
        }
        // The bind mount keeps the file alive: nothing is left in /tmp.
        mounted = written &&
                  mount(conf.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) == 0;
        unlink(conf.c_str());
        rmdir(dir);
    }
    if (!mounted) {
        close(fd);
        return -1;
    }
    return fd;
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Ping-pongs between two instances while another thread of the client looks up a name nobody
// answers for; `stalled` if one round trip waited for the lookup.
int ping_pong_during_unanswered_lookup(const std::string& scheme) {
    const int resolver = unanswering_resolver();
    if (resolver < 0) return no_private_resolver;
    Pair pair = make_peers(scheme);
    Pump server_pump(*pair.server.instance);
    BMI_addr_t client_addr = introduce(pair);
    std::atomic<bool> looked_up{false};
    double lookup_s = 0;
    std::thread lookup([&] {
        const auto start = Clock::now();
        BMI_addr_t unused = 0;
        pair.client.instance->addr_lookup(scheme + "://bmi-unanswered.example:7000", unused);
        lookup_s = seconds_since(start);
        looked_up = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // into the resolver
    double longest = 0;
    int rounds = 0;
    char out[8] = "ping", in[8];
    while (!looked_up) {
        const auto start = Clock::now();
        bmi_op_id_t rid = 0;
        if (pair.server.instance->post(recv_request(pair.server, client_addr, in, sizeof in, 5),
                                       rid, nullptr) < 0)
            break;
        post_and_wait(pair.client, send_request(pair.client, pair.server_addr, out, sizeof out, 5),
                      30000);
        if (rid != 0) wait_op(pair.server, rid, 30000);
        longest = std::max(longest, seconds_since(start));
        ++rounds;
    }
    lookup.join();
    close(resolver);
    std::fprintf(stderr, "%s: lookup took %.2f s; %d round trips meanwhile, the longest %.3f s\n",
                 scheme.c_str(), lookup_s, rounds, longest);
    if (lookup_s < resolver_timeout_s - 1) return resolver_answered;
    return longest < 2.0 ? served : stalled;
}

// Runs body in a child process (its mount namespace changes are its own) and returns its exit
// code; the child is killed by its pid if it outlives deadline_ms.
template <class Body>
int in_child(Body&& body, int deadline_ms) {
    std::fflush(nullptr);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        int code = 4;
        try {
            code = body();
        } catch (...) {
        }
        std::fflush(nullptr);
        std::_Exit(code);
    }
    const auto deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            FAIL("the child did not finish in time");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

}  // namespace

TEST_CASE("peer rules: a lookup whose resolver never answers holds up no other operation",
          "[rules][resolver]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    if (!adapter_for(scheme).resolves_host_names) {
        WARN("method " << scheme << ": addresses name no host, no resolver to wait for");
        return;
    }
    const int outcome = in_child([&] { return ping_pong_during_unanswered_lookup(scheme); }, 60000);
    INFO("method " << scheme << ", child outcome " << outcome
                   << " (1: a round trip waited for the lookup, 2: the resolver answered, "
                      "3: no private resolver (needs root), 4: a check failed in the child)");
    REQUIRE(outcome == served);
}
