// SPDX-License-Identifier: LGPL-2.1-or-later
// A wait whose peer waits on our own CPU sleeps at once instead of spinning: the peer can
// answer only once we stop (Doorbell::note_waiting_cpu). Two threads pinned like the two
// processes of a ping-pong, on one CPU and on two, count what their waits did (shm Stats), and
// which way the receiver copied messages from a shared buffer.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "methods/shm/shm_doorbell.hpp"
#include "methods/shm/shm_method.hpp"
#include "shm_stats.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
constexpr int rounds = 300;
constexpr bmi_msg_tag_t ping_tag = 2;
constexpr bmi_msg_tag_t pong_tag = 3;

bool pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Finishes a post without Catch2 (it may run on the server thread); false on any failure.
bool finish(Side& side, int posted, bmi_op_id_t id) {
    if (posted == 1) return true;
    if (posted != 0) return false;
    for (int slice = 0; slice < 100; ++slice) {
        int outcount = 0;
        core::Completion done;
        if (side.instance->test(id, side.context, 100, outcount, done) != 0) return false;
        if (outcount == 1) return done.error == 0;
    }
    return false;
}

// One kind of ping: the client sends size bytes from out, the server receives them into in;
// the first byte carries the round.
struct Ping {
    char* out;
    char* in;
    bmi_size_t size;
    int rounds;
};

// The server's half: answers each ping with a pong, on its own thread pinned to cpu.
bool serve(Side& server, BMI_addr_t to_client, const Ping& ping, int cpu) {
    if (!pin_to(cpu)) return false;
    for (int i = 0; i < ping.rounds; ++i) {
        bmi_op_id_t id = 0;
        int rc = server.instance->post(
            recv_request(server, to_client, ping.in, ping.size, ping_tag), id, nullptr);
        if (!finish(server, rc, id) || ping.in[0] != static_cast<char>(i)) return false;
        const int pong = -i;
        rc = server.instance->post(send_request(server, to_client, &pong, sizeof pong, pong_tag),
                                   id, nullptr);
        if (!finish(server, rc, id)) return false;
    }
    return true;
}

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
    cpu_set_t set;
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    return cpus;
}

std::uint64_t futile_spins(Side& side) {
    const auto stats = shm_stats(side);
    REQUIRE(stats);
    return stats->futile_spins;
}

// ping.rounds ping-pongs on pair, client on client_cpu (this thread) and server on server_cpu.
void ping_pong(Pair& pair, BMI_addr_t to_client, const Ping& ping, int client_cpu, int server_cpu) {
    cpu_set_t saved;
    REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
    std::atomic<bool> served{false};
    std::thread server([&] { served = serve(pair.server, to_client, ping, server_cpu); });
    bool pinned = pin_to(client_cpu);
    for (int i = 0; pinned && i < ping.rounds; ++i) {
        ping.out[0] = static_cast<char>(i);
        int pong = 1;
        bmi_op_id_t recv_id = 0;
        REQUIRE(pair.client.instance->post(
                    recv_request(pair.client, pair.server_addr, &pong, sizeof pong, pong_tag),
                    recv_id, nullptr) == 0);
        post_and_wait(pair.client,
                      send_request(pair.client, pair.server_addr, ping.out, ping.size, ping_tag));
        REQUIRE(wait_op(pair.client, recv_id).error == 0);
        REQUIRE(pong == -i);
    }
    server.join();
    REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
    REQUIRE(pinned);
    REQUIRE(served);
}

// Small ping-pongs placed so; returns the futile spins of (client, server).
std::pair<std::uint64_t, std::uint64_t> small_pings(int client_cpu, int server_cpu) {
    Pair pair = make_peers("shm");
    const BMI_addr_t to_client = introduce(pair);
    const auto before = std::make_pair(futile_spins(pair.client), futile_spins(pair.server));
    int out = 0, in = 0;
    ping_pong(pair, to_client,
              Ping{reinterpret_cast<char*>(&out), reinterpret_cast<char*>(&in), sizeof out, rounds},
              client_cpu, server_cpu);
    return {futile_spins(pair.client) - before.first, futile_spins(pair.server) - before.second};
}

constexpr bmi_size_t large_size = 1 << 20;
constexpr int large_rounds = 40;

// Pings of large_size from a BMI_memalloc buffer into another, placed so; returns the
// server's receives of that size copied by both processes and by the server alone.
std::pair<std::uint64_t, std::uint64_t> large_pings(int client_cpu, int server_cpu) {
    Pair pair = make_peers("shm");
    const BMI_addr_t to_client = introduce(pair);
    auto* out = static_cast<char*>(pair.client.instance->memalloc(pair.server_addr, large_size));
    auto* in = static_cast<char*>(pair.server.instance->memalloc(to_client, large_size));
    REQUIRE(out != nullptr);
    REQUIRE(in != nullptr);
    ping_pong(pair, to_client, Ping{out, in, large_size, large_rounds}, client_cpu, server_cpu);
    const auto both = large_receives(pair.server, large_size, method::shm::TakenPath::shared);
    const auto alone =
        large_receives(pair.server, large_size, method::shm::TakenPath::shared_single);
    REQUIRE(both);
    REQUIRE(alone);
    pair.client.instance->memfree(pair.server_addr, out);
    pair.server.instance->memfree(to_client, in);
    return {*both, *alone};
}
}  // namespace

TEST_CASE("shm: the doorbell tells peers which CPU its owner waits on", "[shm][cpu]") {
    method::shm::Doorbell owner, peer;
    REQUIRE(owner.create() == 0);
    REQUIRE(peer.attach(dup(owner.fd())) == 0);
    REQUIRE_FALSE(peer.owner_waits_on(0));  // not known yet is not CPU 0
    owner.note_waiting_cpu(3);
    REQUIRE(peer.owner_waits_on(3));
    REQUIRE_FALSE(peer.owner_waits_on(0));
    owner.note_waiting_cpu(0);
    REQUIRE(peer.owner_waits_on(0));
    REQUIRE_FALSE(peer.owner_waits_on(3));
}

TEST_CASE("shm: waits sleep at once while the peer shares our CPU", "[shm][cpu]") {
    const int cpu = allowed_cpus().front();
    const auto [client, server] = small_pings(cpu, cpu);
    INFO("futile spins: client " << client << ", server " << server);
    // The server waits for every ping after its pong, while the client it woke runs on its
    // CPU; the client often finds its pong without waiting at all.
    REQUIRE(client + server >= rounds / 2);
}

TEST_CASE("shm: waits spin as before while the peer has a CPU of its own", "[shm][cpu]") {
    const auto cpus = allowed_cpus();
    if (cpus.size() < 2) {
        WARN("SKIP: this process may run on one CPU only");
        return;
    }
    const auto [client, server] = small_pings(cpus[0], cpus[1]);
    INFO("futile spins: client " << client << ", server " << server);
    // Only a stale hint: the server's first waits ran on the thread that set the pair up.
    REQUIRE(client + server <= rounds / 20);
}

// A sender waiting on the receiver's CPU cannot copy while the receiver does: a message from
// its shared buffer is then copied by the receiver alone, and split as before otherwise.
TEST_CASE("shm: a shared buffer's sender on our CPU leaves the copy to us", "[shm][cpu]") {
    const auto cpus = allowed_cpus();
    const auto [both, alone] = large_pings(cpus.front(), cpus.front());
    INFO("one CPU: split " << both << ", alone " << alone);
    REQUIRE(both + alone == static_cast<std::uint64_t>(large_rounds));
    REQUIRE(alone >= large_rounds / 2);
    if (cpus.size() < 2) {
        WARN("SKIP: this process may run on one CPU only");
        return;
    }
    const auto [two_both, two_alone] = large_pings(cpus[0], cpus[1]);
    INFO("two CPUs: split " << two_both << ", alone " << two_alone);
    REQUIRE(two_both + two_alone == static_cast<std::uint64_t>(large_rounds));
    REQUIRE(two_alone <= large_rounds / 10);  // only a stale hint, as above
}
