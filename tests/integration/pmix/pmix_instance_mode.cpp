// SPDX-License-Identifier: LGPL-2.1-or-later
// pmix_alloc_child's `instance` mode: a real BMI server started from allocation ids read from
// PMIx (option allocation_id=), checked against what PMIx holds for this process:
//
//   instance --ids ID[,ID...] --expect found|fallback
//
// found:    the server listens on every allocated tcp plane, on exactly this process's slice
//           of the ports (local rank * endpts onwards); with a key in the allocation a keyless
//           client is refused (BMI_EACCES) and a client of the same allocation gets in.
// fallback: no launcher, or one without the ids: the server starts on its normal listen
//           address (tcp://127.0.0.1:0), and the debug log says so (the test reads stderr).
#include "tests/integration/pmix/pmix_instance_mode.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bmi.h"
#include "bmi/bmi.hpp"
#include "support/planes/pmix_allocation.hpp"

using namespace std::chrono_literals;

namespace bmi::test::pmix {

namespace {
using support::planes::PmixAllocations;
using support::planes::PmixStatus;

std::vector<std::string> split(const std::string& list, char separator) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t end = std::min(list.find(separator, start), list.size());
        out.push_back(list.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

std::string join(const std::vector<std::string>& items, char separator) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : std::string(1, separator)) + item;
    return out;
}

// The addresses the allocation gives this process: its slice of each tcp entry's ports.
std::vector<std::string> expected_listen(const PmixAllocations& read) {
    std::vector<std::string> out;
    for (const auto& entry : read.entries) {
        std::vector<unsigned> ports;
        for (const auto& r : entry.ports.ranges())
            for (unsigned p = r.first; p <= r.last; ++p) ports.push_back(p);
        const std::string host = entry.plane == "::1/128" ? "[::1]" : "127.0.0.1";
        for (std::size_t i = 0; i < entry.endpoints; ++i) {
            const std::size_t at = read.local_rank * entry.endpoints + i;
            out.push_back("tcp://" + host + ":" +
                          (at < ports.size() ? std::to_string(ports[at]) : std::string("?")));
        }
    }
    return out;
}

// The first unexpected message from client to server: its send's error (empty: delivered).
std::error_code first_message(Session& client, Session& server, const std::string& to) {
    auto ctx = client.open_context();
    if (!ctx) return ctx.error();
    auto peer = client.lookup(to);
    if (!peer) return peer.error();
    const std::byte hello{1};
    auto sent = client.post_send_unexpected(*ctx, *peer, {&hello, 1}, 1);
    if (!sent) return sent.error();
    for (int i = 0; i < 200; ++i) {
        auto got = server.test_unexpected(1, 10ms);
        if (got && !got->empty()) return {};
        if (sent->immediate) continue;
        auto done = client.test(*ctx, sent->id, 10ms);
        if (done && *done && (*done)->error) return (*done)->error;
    }
    return errc::timed_out;
}

int fail(const std::string& what) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    return 1;
}
}  // namespace

int instance_mode(std::span<const std::string> args) {
    std::vector<std::string> ids;
    std::string expect;
    for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
        if (args[i] == "--ids")
            ids = split(args[i + 1], ',');
        else if (args[i] == "--expect")
            expect = args[i + 1];
    }
    if (ids.empty() || (expect != "found" && expect != "fallback")) {
        std::fprintf(stderr, "instance needs --ids and --expect found|fallback\n");
        return 2;
    }
    const std::string options = "allocation_id=" + join(ids, '+');
    if (expect == "fallback") {
        auto server = Session::create({"bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, options});
        if (!server)
            return fail("no allocation, yet the server did not start: " + server.error().message());
        const std::string at = (*server)->listen_address();
        std::printf("fell back: listening on %s\n", at.c_str());
        return at.rfind("tcp://127.0.0.1:", 0) == 0 ? 0 : fail("listens on " + at);
    }

    PmixAllocations read;
    std::string note;
    if (support::planes::read_pmix_allocations(ids, read, note) != PmixStatus::found)
        return fail("PMIx did not hold the ids: " + note);
    auto server = Session::create({"bmi_tcp", "", BMI_INIT_SERVER, options});
    if (!server) return fail("server from PMIx allocation: " + server.error().message());
    const auto listening = split((*server)->listen_address(), ',');
    const auto wanted = expected_listen(read);
    std::printf("local rank %u listens on %s\n", read.local_rank,
                (*server)->listen_address().c_str());
    if (listening != wanted)
        return fail("listens on " + join(listening, ',') + ", expected " + join(wanted, ','));
    if (read.key.empty()) return 0;
    auto keyless = Session::create({"bmi_tcp", "", 0, ""});
    auto holder = Session::create({"bmi_tcp", "", 0, options});
    if (!keyless || !holder) return fail("clients did not start");
    // A keyless client's first message leaves with its upgrade offer before the server can
    // say that it wants a key (doc/security.md): it may complete, dropped unread; the next
    // is refused.
    auto keyless_error = first_message(**keyless, **server, listening.front());
    // (timed out: the message completed and never arrived)
    for (int i = 0; i < 100 && (!keyless_error || keyless_error == errc::timed_out); ++i) {
        auto nothing = (*server)->test_unexpected(1, 20ms);
        if (nothing && !nothing->empty()) return fail("a keyless client's message was delivered");
        keyless_error = first_message(**keyless, **server, listening.front());
    }
    if (keyless_error != errc::permission_denied)
        return fail("a keyless client was not refused with BMI_EACCES");
    if (auto e = first_message(**holder, **server, listening.front()))
        return fail("a client of the same allocation was refused: " + e.message());
    return 0;
}

}  // namespace bmi::test::pmix
