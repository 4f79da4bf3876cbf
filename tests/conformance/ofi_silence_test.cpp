// SPDX-License-Identifier: LGPL-2.1-or-later
// A silent ofi peer: libfabric's providers keep no keepalive of their own, so a peer that falls
// silent while a receive of ours waits on it (its node lost, its process stopped) would hold
// that receive for ever. The method pings it half way through ofi_silent_peer_timeout_ms and
// takes it as gone at the end; a peer that polls answers, however long it has nothing to say.
// A peer we looked up stays reachable after: the next send greets it again. A client of ours
// is pinged while idle too: one whose process ended is found by the failed ping (or, over shm,
// by the sweep of its region) and forgotten; one that only stopped polling is kept.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness.hpp"
#include "methods/method_config.hpp"

#if BMI_METHOD_OFI
#include "ofi_stats.hpp"

using namespace bmi;
using namespace bmi::test;
using Clock = std::chrono::steady_clock;

namespace {
long long ms_since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// A client that says where it is and ends without a bye (nothing closed, nothing finalized),
// idle: nothing of the server's waits on it.
[[noreturn]] void say_here_and_end(const std::string& address) {
    BMI_addr_t server = 0;
    Side client = client_in_child(address, server);
    const char here[] = "here";
    auto request = unexpected_request(client, server, here, sizeof here, 1);
    std::_Exit(post_and_wait(client, request, 30000).error == 0 ? 0 : 5);
}
}  // namespace

TEST_CASE("ofi: a peer that stops polling while a receive waits on it is gone at the bound",
          "[conformance][ofi][silence]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi", "ofi_silent_peer_timeout_ms=400");
    introduce(pair);
    // Nothing polls the server from here on: our ping reaches it and it cannot answer.
    char reply[16];
    const auto start = Clock::now();
    const core::Completion done = post_and_wait(
        pair.client, recv_request(pair.client, pair.server_addr, reply, sizeof reply, 11), 10000);
    const long long took = ms_since(start);
    CHECK(done.error == -BMI_ETIMEDOUT);
    CHECK(took >= 400);
    CHECK(took < 4000);
    // The server polls again: the address we looked up still reaches it, greeted anew.
    Pump server(*pair.server.instance);
    const std::string text = "back";
    core::PostRequest note = unexpected_request(pair.client, pair.server_addr, text.data(),
                                                static_cast<bmi_size_t>(text.size()), 12);
    CHECK(post_and_wait(pair.client, note).error == 0);
    const core::UnexpectedMessage message = wait_unexpected(pair.server);
    CHECK(std::string(static_cast<const char*>(message.buffer), message.size) == text);
    pair.server.instance->unexpected_free(message.buffer);
}

TEST_CASE("ofi: a peer that polls and has nothing to say keeps our receive waiting",
          "[conformance][ofi][silence]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi", "ofi_silent_peer_timeout_ms=600");
    const BMI_addr_t client = introduce(pair);
    Pump server(*pair.server.instance);
    char reply[16] = {};
    bmi_op_id_t id = 0;
    REQUIRE(pair.client.instance->post(
                recv_request(pair.client, pair.server_addr, reply, sizeof reply, 11), id,
                nullptr) == 0);
    // Three bounds of silence: each half is met by a ping the server answers as it polls.
    const auto start = Clock::now();
    while (ms_since(start) < 1800) {
        int outcount = 0;
        core::Completion early;
        REQUIRE(pair.client.instance->test(id, pair.client.context, 50, outcount, early) == 0);
        REQUIRE(outcount == 0);
    }
    const std::string text = "late";
    REQUIRE(post_and_wait(pair.server, send_request(pair.server, client, text.data(),
                                                    static_cast<bmi_size_t>(text.size()), 11))
                .error == 0);
    const core::Completion done = wait_op(pair.client, id);
    CHECK(done.error == 0);
    CHECK(std::string(reply, text.size()) == text);
}

TEST_CASE("ofi: a client that stops polling is kept, however long it is silent",
          "[conformance][ofi][silence]") {
    if (!scheme_compiled("ofi")) return;
    Pair pair = make_peers("ofi", "ofi_silent_peer_timeout_ms=200");
    const BMI_addr_t client = introduce(pair);
    const std::uint64_t known = ofi_stats(pair.server).peers;
    {
        // Ten bounds in which the client answers none of the server's pings, and nothing of
        // the server's waits on it.
        Pump server(*pair.server.instance);
        std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    CHECK(ofi_stats(pair.server).peers == known);
    Pump server(*pair.server.instance);
    const std::string text = "still here";
    core::PostRequest note = unexpected_request(pair.client, pair.server_addr, text.data(),
                                                static_cast<bmi_size_t>(text.size()), 12);
    CHECK(post_and_wait(pair.client, note).error == 0);
    const core::UnexpectedMessage message = wait_unexpected(pair.server);
    CHECK(message.addr == client);
    CHECK(std::string(static_cast<const char*>(message.buffer), message.size) == text);
    pair.server.instance->unexpected_free(message.buffer);
}

// Forks (libfabric's verbs does not work in a child forked after the parent used it): over
// verbs it runs in a process of its own, as the [vanish] rules do.
TEST_CASE("ofi: an idle client whose process ended without a bye is forgotten",
          "[conformance][ofi][silence][ended]") {
    if (!scheme_compiled("ofi")) return;
    ForkedClient forked = fork_client(say_here_and_end);
    const pid_t child = forked.pid;
    Pair pair = make_peers(
        "ofi",
        "ofi_silent_peer_timeout_ms=300,ofi_send_timeout_ms=1000,ofi_shm_sweep_period_ms=200");
    forked.tell(pair.server.instance->listen_addresses());
    const core::UnexpectedMessage here = wait_unexpected(pair.server, 40000);
    pair.server.instance->unexpected_free(here.buffer);
    CHECK(ofi_stats(pair.server).peers == 1);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // Over rxm its ping never completes and the send deadline takes it (or the ping fails);
    // over shm the sweep finds its region gone.
    const auto ended = Clock::now();
    std::uint64_t known = 1;
    {
        Pump server(*pair.server.instance);
        while (known != 0 && ms_since(ended) < 10000) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            known = ofi_stats(pair.server).peers;
        }
    }
    INFO("forgotten after " << ms_since(ended) << " ms");
    CHECK(known == 0);
    remove_shm_regions_of(child);
}

#endif
