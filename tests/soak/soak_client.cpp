// SPDX-License-Identifier: LGPL-2.1-or-later
// One soak client process for examples/pvfs_server: N checked request/response pairs in a row,
// each answer's header and every payload byte checked against its request id, and the round
// trip times kept per tenth of the run so soak_run.py can compare the first tenth with the last.
//
//   soak_client [--requests N] [--size BYTES] [--timeout-ms MS] [--id K] SERVER_ADDR
//
// It connects with one unmeasured request, prints "READY" and waits for a line on stdin, so
// that all clients of a run start together. Then it prints
//   RESULT ok=A lost=B corrupt=C unsent=D
//   TENTH t lower_ns:count ...    (t = 0..9; a bucket spans 1/16 of a power of two from lower_ns)
// and exits 0 only if all N were answered correctly. It stops at the first bad request: what
// follows a lost answer says nothing new and could take a timeout each.
#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "pvfs_session_client.hpp"

namespace {

using bmi::soak::Outcome;
using Clock = std::chrono::steady_clock;

// Log-linear buckets: 16 per power of two (6 % wide), exact below 16 ns.
std::uint64_t bucket_floor(std::uint64_t ns) {
    if (ns < 16) return ns;
    const int shift = std::bit_width(ns) - 5;  // keep the top 5 bits
    return (ns >> shift) << shift;
}

struct Options {
    std::uint64_t requests = 1000;
    std::uint64_t size = 4096;
    std::uint64_t timeout_ms = 10000;
    std::uint64_t id = static_cast<std::uint64_t>(getpid());
    std::string server;
};

bool parse(int argc, char** argv, Options& o) {
    for (int a = 1; a < argc; ++a) {
        const std::string arg = argv[a];
        if (arg[0] != '-') {
            o.server = arg;
            continue;
        }
        std::uint64_t* value = arg == "--requests"     ? &o.requests
                               : arg == "--size"       ? &o.size
                               : arg == "--timeout-ms" ? &o.timeout_ms
                               : arg == "--id"         ? &o.id
                                                       : nullptr;
        if (value == nullptr || a + 1 >= argc) return false;
        *value = std::strtoull(argv[++a], nullptr, 10);
    }
    return !o.server.empty() && o.requests > 0 && o.timeout_ms > 0;
}

struct Tally {
    std::uint64_t ok = 0, lost = 0, corrupt = 0, attempted = 0;
    std::array<std::map<std::uint64_t, std::uint64_t>, 10> tenths;  // lower_ns -> count
};

// The measured run: requests one after another until all are done or one goes wrong.
Tally run(const Options& o, bmi::soak::PvfsSessionClient& client, std::uint64_t base) {
    Tally t;
    std::string why;
    for (std::uint64_t i = 1; i <= o.requests; ++i) {
        const auto start = Clock::now();
        const Outcome outcome = client.exchange(PVFS_OP_GETATTR, base | i,
                                                static_cast<bmi_msg_tag_t>(i & 0x7fffffff), why);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
        ++t.attempted;
        if (outcome != Outcome::ok) {
            (outcome == Outcome::lost ? t.lost : t.corrupt)++;
            std::fprintf(stderr, "soak_client %llu: request %llu: %s\n",
                         static_cast<unsigned long long>(o.id), static_cast<unsigned long long>(i),
                         why.c_str());
            break;
        }
        ++t.ok;
        ++t.tenths[(i - 1) * 10 / o.requests][bucket_floor(static_cast<std::uint64_t>(ns.count()))];
    }
    return t;
}

void print(const Options& o, const Tally& t) {
    std::printf("RESULT ok=%llu lost=%llu corrupt=%llu unsent=%llu\n",
                static_cast<unsigned long long>(t.ok), static_cast<unsigned long long>(t.lost),
                static_cast<unsigned long long>(t.corrupt),
                static_cast<unsigned long long>(o.requests - t.attempted));
    for (std::size_t i = 0; i < t.tenths.size(); ++i) {
        std::printf("TENTH %zu", i);
        for (const auto& [lower, count] : t.tenths[i])
            std::printf(" %llu:%llu", static_cast<unsigned long long>(lower),
                        static_cast<unsigned long long>(count));
        std::printf("\n");
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr,
                     "usage: %s [--requests N] [--size BYTES] [--timeout-ms MS] "
                     "[--id K] SERVER_ADDR\n",
                     argv[0]);
        return 2;
    }
    std::string why;
    auto client = bmi::soak::PvfsSessionClient::open(o.server, o.size,
                                                     std::chrono::milliseconds(o.timeout_ms), why);
    // The id in the high half keeps request ids, and so answers, distinct across clients.
    const std::uint64_t base = o.id << 32;
    if (!client || client->exchange(PVFS_OP_GETATTR, base, 0, why) != Outcome::ok) {
        std::fprintf(stderr, "soak_client %llu: connecting: %s\n",
                     static_cast<unsigned long long>(o.id), why.c_str());
        return 1;
    }
    std::printf("READY\n");
    std::fflush(stdout);
    std::string go;
    std::getline(std::cin, go);

    const Tally t = run(o, *client, base);
    const std::uint64_t last = o.requests + 1;
    if (t.ok == o.requests &&
        client->exchange(PVFS_OP_BYE, base | last, static_cast<bmi_msg_tag_t>(last & 0x7fffffff),
                         why) != Outcome::ok)
        std::fprintf(stderr, "soak_client %llu: goodbye: %s\n",
                     static_cast<unsigned long long>(o.id), why.c_str());
    print(o, t);
    return t.ok == o.requests ? 0 : 1;
}
