// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared peer rules (peer_rules_test.cpp) on a peer whose process ends mid-transfer without
// a goodbye: what the server had pending with it fails within the deadlines, and another
// client is served meanwhile.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attacker.hpp"
#include "harness.hpp"
#include "peer_rules.hpp"
#include "process_cpu.hpp"

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t large = std::size_t{256} << 20;  // no transfer of it ends in a few ms
constexpr bmi_msg_tag_t to_server = 21, to_client = 22;
// How long the vanishing client may take to deliver its first message: under ASan in the
// emulated RDMA guest, many seconds, and more after a long run. The server waits longer
// still, so a client that gave up is told apart from a lost message.
constexpr std::chrono::seconds client_patience{30};

// The vanishing client: announces a large send, says where it is with an unexpected message,
// moves bytes for a moment and ends without finalizing (no goodbye, nothing closed cleanly).
[[noreturn]] void vanish(const std::string& address) {
    BMI_addr_t server = 0;
    Side client = client_in_child(address, server);
    std::vector<char> out(large, 'v');
    bmi_op_id_t id = 0;
    if (client.instance->post(
            send_request(client, server, out.data(), static_cast<bmi_size_t>(large), to_server), id,
            nullptr) < 0)
        std::_Exit(5);
    const char here[] = "here";
    auto request = unexpected_request(client, server, here, sizeof here, 1);
    bmi_op_id_t here_id = 0;
    const int here_rc = client.instance->post(request, here_id, nullptr);
    if (here_rc < 0) std::_Exit(6);
    // Gone only once "here" has left (after the handshake, however slow a sanitizer makes it),
    // and after a moment more of moving bytes.
    bool sent = here_rc == 1;
    const auto give_up = Clock::now() + client_patience;
    auto until = Clock::time_point::max();
    while (Clock::now() < until) {
        core::Completion c[4];
        int done = 0;
        client.instance->testcontext(client.context, 5, done, c);
        for (int i = 0; i < done; ++i) sent = sent || c[i].id == here_id;
        if (sent && until == Clock::time_point::max())
            until = Clock::now() + std::chrono::milliseconds(200);
        if (!sent && Clock::now() > give_up) std::_Exit(7);
    }
    std::_Exit(0);
}

}  // namespace

TEST_CASE("peer rules: a peer that vanishes mid-transfer fails what waited on it in time",
          "[rules][vanish]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    const MethodAdapter& adapter = adapter_for(scheme);
    // The child starts before any instance or thread of ours exists.
    ForkedClient forked = fork_client(vanish);
    const pid_t child = forked.pid;
    const std::string options =
        joined(joined(adapter.scheme_option("send_timeout_ms", rule_bound_ms),
                      adapter.scheme_option("rendezvous_timeout_ms", rule_bound_ms)),
               adapter.stall_gap.empty() ? adapter.scheme_option("stall_timeout_ms", rule_bound_ms)
                                         : std::string());
    Pair pair = make_peers(scheme, options);
    forked.tell(pair.server.instance->listen_addresses());

    // The client's first message, or what became of the client if it does not come.
    core::UnexpectedMessage here;
    int here_count = 0;
    for (const auto until = Clock::now() + client_patience + std::chrono::seconds(10);
         here_count == 0 && Clock::now() < until;)
        REQUIRE(pair.server.instance->testunexpected(10, here_count, {&here, 1}) == 0);
    if (here_count == 0) {
        int early = 0;
        const pid_t ended = waitpid(child, &early, WNOHANG);
        if (ended == 0) {
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
        }
        FAIL("the vanishing client's first message did not come; the client "
             << (ended == child ? "had ended, status " + std::to_string(early)
                                : std::string("still ran")));
    }
    pair.server.instance->unexpected_free(here.buffer);
    std::vector<char> in(large), out(std::size_t{16} << 20, 's');
    bmi_op_id_t recv_id = 0, send_id = 0;
    const auto start = Clock::now();
    // A post may already find the peer gone (a slow server, under a sanitizer, posts after
    // the child ended): failing at once is failing in time.
    const int recv_rc = pair.server.instance->post(
        recv_request(pair.server, here.addr, in.data(), static_cast<bmi_size_t>(large), to_server),
        recv_id, nullptr);
    const int send_rc =
        pair.server.instance->post(send_request(pair.server, here.addr, out.data(),
                                                static_cast<bmi_size_t>(out.size()), to_client),
                                   send_id, nullptr);
    CHECK(recv_rc != 1);  // nothing of the vanished peer's 256 MiB can have completed it
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    remove_shm_regions_of(child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);

    // Both fail (the peer is gone or late), each well before the vanished peer could matter.
    std::vector<bmi_op_id_t> pending;
    for (auto [rc, id] : {std::pair{recv_rc, recv_id}, std::pair{send_rc, send_id}})
        if (rc == 0) pending.push_back(id);
    int served = 0;
    while (!pending.empty() &&
           Clock::now() < start + std::chrono::milliseconds(rule_bound_ms + 200 + rule_late_ms)) {
        core::Completion c[4];
        int done = 0;
        REQUIRE(pair.server.instance->testcontext(pair.server.context, 10, done, c) == 0);
        for (int i = 0; i < done; ++i) {
            if (std::erase(pending, c[i].id) == 0) continue;
            CHECK(c[i].error != 0);
        }
        // A client of its own is served while the server waits on the vanished one.
        if (served < 3) {
            Pump pump(*pair.server.instance);
            const char text[] = "still served";
            auto request = unexpected_request(pair.client, pair.server_addr, text, sizeof text, 2);
            CHECK(post_and_wait(pair.client, request, 5000).error == 0);
            ++served;
        }
    }
    INFO(pending.size() << " of the server's operations toward the vanished peer still wait");
    CHECK(pending.empty());
    // The unexpected messages the served client sent reached the application.
    for (int i = 0; i < served; ++i) {
        INFO("waiting for the served client's message " << i + 1 << " of " << served);
        const auto got = wait_unexpected(pair.server, 5000);
        pair.server.instance->unexpected_free(got.buffer);
    }
}

// A peer that is gone before it ever answered: its address refuses every connection. Sends to
// it fail by the initiator's setup deadline at the latest, and the wait sleeps, as any wait on
// a peer must (a provider that keeps answering "try again" while it redials is no reason to
// spin). The CPU counted is that of the wait after its first dial: building the first
// connection's resources is work, not waiting, and under a sanitizer in the emulated RDMA
// guest it alone takes a good part of the deadline.
TEST_CASE("peer rules: sends to an address nothing listens on fail in time, without spinning",
          "[rules][vanish]") {
    const std::string scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    const MethodAdapter& adapter = adapter_for(scheme);
    constexpr int deadline_ms = 1500, first_dial_ms = 500;
    ClosedAddress closed(scheme);
    Side client;
    core::InitParams params;
    params.options = adapter.setup_deadline_option(deadline_ms);
    params.dialect = selected_dialect();
    REQUIRE(core::Instance::create(params, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    BMI_addr_t addr = 0;
    if (client.instance->addr_lookup(closed.address(), addr) != 0) return;  // refused at once

    std::vector<char> data(1024, 'x');
    const auto start = Clock::now();
    std::vector<bmi_op_id_t> pending;
    for (int i = 0; i < 2; ++i) {
        bmi_op_id_t id = 0;
        const int rc = client.instance->post(
            send_request(client, addr, data.data(), static_cast<bmi_size_t>(data.size()), 7), id,
            nullptr);
        if (rc == 0) pending.push_back(id);  // < 0: refused at once; 1: written (legacy, keyless)
    }
    const auto give_up = start + std::chrono::milliseconds(deadline_ms + 3000);
    std::optional<std::pair<Clock::time_point, double>> counted;  // from when, and the CPU then
    while (!pending.empty() && Clock::now() < give_up) {
        if (!counted && Clock::now() >= start + std::chrono::milliseconds(first_dial_ms))
            counted.emplace(Clock::now(), process_cpu_seconds());
        core::Completion c[4];
        int done = 0;
        REQUIRE(client.instance->testcontext(client.context, 50, done, c) == 0);
        for (int i = 0; i < done; ++i)
            if (std::erase(pending, c[i].id) != 0) CHECK(c[i].error != 0);
    }
    const auto end = Clock::now();
    INFO(pending.size() << " sends still wait");
    CHECK(pending.empty());
    CHECK(std::chrono::duration<double>(end - start).count() <= (deadline_ms + 3000) / 1000.0);
    if (!counted) return;  // over before the first dial was done: nothing waited
    const double waited = std::chrono::duration<double>(end - counted->first).count(),
                 cpu = process_cpu_seconds() - counted->second;
    INFO("the last " << waited << " s of the wait took " << cpu << " s of CPU");
    CHECK(cpu <= 0.3 * waited + 0.05);
}
