// SPDX-License-Identifier: LGPL-2.1-or-later
// Churn load for examples/pvfs_server: many distinct short-lived clients over time, each a
// Session of its own (so, to the server, a new connection and a new address), making a few
// checked requests and saying goodbye. One process, a few threads: a process per client would
// cap the rate at a few hundred clients a second.
//
//   churn_driver [--clients N] [--parallel P] [--requests R] [--size BYTES] [--timeout-ms MS]
//                [--report-every K] [--no-bye] SERVER_ADDR
//
// Clients run in blocks of K. After each block no client of ours is alive; the driver prints
// "AT <clients done> failed=<F>" and waits for a line on stdin, so whoever samples the server
// (soak_run.py) does it at a quiet moment. Ends with "DONE clients=N failed=F"; exit 0 if every
// request of every client was answered correctly.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pvfs_session_client.hpp"

namespace {

using bmi::soak::Outcome;
using bmi::soak::PvfsSessionClient;

struct Options {
    std::uint64_t clients = 1000;
    unsigned parallel = 2;
    std::uint64_t requests = 2;
    std::size_t size = 256;
    std::uint64_t report_every = 100;
    int timeout_ms = 10000;
    bool bye = true;
    std::string server;
};

std::atomic<std::uint64_t> failed_clients{0};
std::mutex report_lock;
int reports_left = 10;  // the first failures say why; more would flood the log

void report(std::uint64_t client, const std::string& why) {
    std::lock_guard lock(report_lock);
    if (reports_left-- > 0)
        std::fprintf(stderr, "churn: client %llu: %s\n", static_cast<unsigned long long>(client),
                     why.c_str());
}

// One client's whole life: connect, ask, say goodbye, go away.
void run_client(const Options& o, std::uint64_t n) {
    std::string why;
    auto client =
        PvfsSessionClient::open(o.server, o.size, std::chrono::milliseconds(o.timeout_ms), why);
    if (!client) {
        report(n, why);
        ++failed_clients;
        return;
    }
    // The client number in the high bits keeps request ids, and so answers, distinct.
    const std::uint64_t base = n << 24;
    for (std::uint64_t i = 0; i <= o.requests; ++i) {
        const bool last = i == o.requests;
        if (last && !o.bye) break;
        const auto op = last ? PVFS_OP_BYE : PVFS_OP_GETATTR;
        if (client->exchange(op, base | i, static_cast<bmi_msg_tag_t>(i), why) != Outcome::ok) {
            report(n, "request " + std::to_string(i) + ": " + why);
            ++failed_clients;
            return;
        }
    }
}

void run_block(const Options& o, std::uint64_t first, std::uint64_t end) {
    std::atomic<std::uint64_t> next{first};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < o.parallel; ++t)
        workers.emplace_back([&] {
            for (std::uint64_t n = next++; n < end; n = next++) run_client(o, n);
        });
    for (auto& w : workers) w.join();
}

bool parse(int argc, char** argv, Options& o) {
    for (int a = 1; a < argc; ++a) {
        const std::string arg = argv[a];
        if (arg == "--no-bye") {
            o.bye = false;
            continue;
        }
        if (arg[0] != '-') {
            o.server = arg;
            continue;
        }
        if (a + 1 >= argc) return false;
        const unsigned long long v = std::strtoull(argv[++a], nullptr, 10);
        if (arg == "--clients")
            o.clients = v;
        else if (arg == "--parallel")
            o.parallel = static_cast<unsigned>(v);
        else if (arg == "--requests")
            o.requests = v;
        else if (arg == "--size")
            o.size = static_cast<std::size_t>(v);
        else if (arg == "--report-every")
            o.report_every = v;
        else if (arg == "--timeout-ms")
            o.timeout_ms = static_cast<int>(v);
        else
            return false;
    }
    return !o.server.empty() && o.parallel > 0 && o.report_every > 0 && o.timeout_ms > 0 &&
           o.clients < (1ull << 40);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr,
                     "usage: %s [--clients N] [--parallel P] [--requests R] [--size BYTES]\n"
                     "          [--timeout-ms MS] [--report-every K] [--no-bye] SERVER_ADDR\n",
                     argv[0]);
        return 2;
    }
    std::string line;
    bool sampler = true;
    for (std::uint64_t done = 0; done < o.clients;) {
        const std::uint64_t end = std::min(o.clients, done + o.report_every);
        run_block(o, done, end);
        done = end;
        std::printf("AT %llu failed=%llu\n", static_cast<unsigned long long>(done),
                    static_cast<unsigned long long>(failed_clients.load()));
        std::fflush(stdout);
        // The sampler's go-ahead; end of input means nobody samples, so carry on.
        if (done < o.clients && sampler) sampler = static_cast<bool>(std::getline(std::cin, line));
    }
    std::printf("DONE clients=%llu failed=%llu\n", static_cast<unsigned long long>(o.clients),
                static_cast<unsigned long long>(failed_clients.load()));
    return failed_clients.load() == 0 ? 0 : 1;
}
