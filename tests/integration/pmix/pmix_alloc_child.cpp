// SPDX-License-Identifier: LGPL-2.1-or-later
// The process fake_rm (or mpirun, or nobody) starts: it reads allocations with
// read_pmix_allocations and checks the result against its command line. Exit 0 when every
// expectation holds, 1 (with a FAIL line on stderr) otherwise, 2 for bad usage.
//
//   pmix_alloc_child MODE ARG...
//   check --ids ID[,ID...] --expect found|unavailable|absent|malformed
//         [--want ALLOCATION-TEXT]...  one per id, in order, compared with format_allocation
//         [--key-len N]                bytes of pmix.alloc.nsec (0: none)
//         [--local-rank N|rank]        `rank`: this process's PMIX_RANK
//         [--note-has TEXT]...         the note must contain TEXT
//         [--within SECONDS]           the read must not take longer
//
//   instance --ids ID[,ID...] --expect found|fallback   (pmix_instance_mode.cpp)
//
// New modes go into `modes` below.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/planes/allocation.hpp"
#include "support/planes/pmix_allocation.hpp"
#include "support/planes/text_fields.hpp"
#include "tests/integration/pmix/pmix_instance_mode.hpp"

namespace {

using bmi::support::planes::PmixAllocations;
using bmi::support::planes::PmixStatus;

struct Usage : std::runtime_error {
    using std::runtime_error::runtime_error;
};

const char* status_name(PmixStatus s) {
    switch (s) {
        case PmixStatus::found:
            return "found";
        case PmixStatus::unavailable:
            return "unavailable";
        case PmixStatus::absent:
            return "absent";
        case PmixStatus::malformed:
            return "malformed";
        case PmixStatus::unloadable:
            return "unloadable";
    }
    return "?";
}

// What one run should see; fields left unset are not checked.
struct Expected {
    std::vector<std::string> ids;
    std::string status;
    std::vector<std::string> wants;
    long key_len = -1;
    long local_rank = -1;
    std::vector<std::string> note_has;
    double within_s = 0;
};

Expected parse_check_args(std::span<const std::string> args) {
    Expected e;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        if (i + 1 >= args.size()) throw Usage(flag + " needs a value");
        const std::string& v = args[++i];
        if (flag == "--ids") {
            for (std::string_view id : bmi::support::planes::split_on(v, ','))
                e.ids.emplace_back(id);
        } else if (flag == "--expect")
            e.status = v;
        else if (flag == "--want")
            e.wants.push_back(v);
        else if (flag == "--key-len")
            e.key_len = std::stol(v);
        else if (flag == "--local-rank") {
            const char* rank = std::getenv("PMIX_RANK");
            if (v == "rank" && rank == nullptr) throw Usage("--local-rank rank without PMIX_RANK");
            e.local_rank = std::stol(v == "rank" ? std::string(rank) : v);
        } else if (flag == "--note-has")
            e.note_has.push_back(v);
        else if (flag == "--within")
            e.within_s = std::stod(v);
        else
            throw Usage("unknown flag " + flag);
    }
    if (e.ids.empty() || e.status.empty()) throw Usage("check needs --ids and --expect");
    return e;
}

// Collects every mismatch, so one run reports all of them.
struct Verdict {
    std::vector<std::string> failures;
    void expect(bool ok, const std::string& what) {
        if (!ok) failures.push_back(what);
    }
};

int check_mode(std::span<const std::string> args) {
    const Expected e = parse_check_args(args);
    PmixAllocations out;
    std::string note;
    const auto start = std::chrono::steady_clock::now();
    const PmixStatus status = bmi::support::planes::read_pmix_allocations(e.ids, out, note);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::printf("status %s, %.3f s: %s\n", status_name(status), took.count(), note.c_str());

    Verdict v;
    v.expect(e.status == status_name(status),
             "status " + std::string(status_name(status)) + ", expected " + e.status);
    v.expect(e.within_s <= 0 || took.count() <= e.within_s,
             "took " + std::to_string(took.count()) + " s");
    for (const std::string& part : e.note_has)
        v.expect(note.find(part) != std::string::npos, "note lacks '" + part + "'");
    if (status == PmixStatus::found) {
        v.expect(out.entries.size() == e.ids.size(), "entry count differs from id count");
        for (std::size_t i = 0; i < e.wants.size() && i < out.entries.size(); ++i) {
            const std::string got = bmi::support::planes::format_allocation(out.entries[i]);
            v.expect(got == e.wants[i], "entry " + std::to_string(i) + " is '" + got +
                                            "', expected '" + e.wants[i] + "'");
        }
        if (e.key_len >= 0)
            v.expect(out.key.size() == static_cast<std::size_t>(e.key_len),
                     "key has " + std::to_string(out.key.size()) + " bytes");
        if (e.local_rank >= 0)
            v.expect(out.local_rank == static_cast<std::uint32_t>(e.local_rank),
                     "local rank " + std::to_string(out.local_rank));
    } else {
        // Nothing may leak out of a read that did not succeed.
        v.expect(out.entries.empty() && out.key.empty(), "out filled although not found");
    }
    for (const std::string& f : v.failures) std::fprintf(stderr, "FAIL: %s\n", f.c_str());
    return v.failures.empty() ? 0 : 1;
}

const std::map<std::string, std::function<int(std::span<const std::string>)>> modes{
    {"check", check_mode},
    {"instance", bmi::test::pmix::instance_mode},
};

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        const auto mode = args.empty() ? modes.end() : modes.find(args[0]);
        if (mode == modes.end()) throw Usage("the first argument is the mode: check, instance");
        return mode->second(std::span<const std::string>(args).subspan(1));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmix_alloc_child: %s\n", e.what());
        return 2;
    }
}
