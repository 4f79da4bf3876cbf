// SPDX-License-Identifier: LGPL-2.1-or-later
// AdaptiveSpin: polls until success or the budget is spent, halves a spent budget, grows on
// success or reward() up to its cap, never polls with a zero budget, and stops spinning for a
// while when the core is shared. The policy cases decide "shared" with a stand-in probe (the
// machine running the tests may or may not be loaded); the last cases use the real one: with a
// busy thread of its own on the spinner's CPU, and around yields made long with and without a
// switch to another task.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/spin/adaptive_spin.hpp"
#include "support/spin/cpu_sharing.hpp"

using bmi::support::AdaptiveSpin;

namespace {
using std::chrono::microseconds;
microseconds own_core() { return microseconds{0}; }
microseconds shared_core() { return microseconds{10}; }       // a peer that answered at once
microseconds busy_neighbour() { return microseconds{3000}; }  // a CPU-bound task's turn
}  // namespace

TEST_CASE("a spin stops at the first successful poll and keeps its budget at the cap") {
    AdaptiveSpin spin(50, own_core);
    int polls = 0;
    REQUIRE(spin.run([&] { return ++polls == 3; }));
    REQUIRE(polls == 3);
    REQUIRE(spin.budget_us() == 50);
}

TEST_CASE("a spent budget halves until nothing is polled any more") {
    AdaptiveSpin spin(40, own_core);
    auto start = std::chrono::steady_clock::now();
    REQUIRE_FALSE(spin.run([] { return false; }));
    REQUIRE(std::chrono::steady_clock::now() - start >= std::chrono::microseconds(40));
    REQUIRE(spin.budget_us() == 20);
    while (spin.budget_us() > 0) spin.run([] { return false; });
    int polls = 0;
    REQUIRE_FALSE(spin.run([&] { return ++polls > 0; }));
    REQUIRE(polls == 0);  // a zero budget sleeps at once
}

TEST_CASE("reward grows a collapsed budget back to the cap and no further") {
    AdaptiveSpin spin(20, own_core);
    while (spin.budget_us() > 0) spin.run([] { return false; });
    spin.reward();
    REQUIRE(spin.budget_us() == 1);
    for (int i = 0; i < 10; ++i) spin.reward();
    REQUIRE(spin.budget_us() == 20);
}

TEST_CASE("a cap of zero never spins") {
    AdaptiveSpin spin(0, own_core);
    spin.reward();
    REQUIRE(spin.budget_us() == 0);
    int polls = 0;
    REQUIRE_FALSE(spin.run([&] { return ++polls > 0; }));
    REQUIRE(polls == 0);
}

TEST_CASE("on a shared core the spin stops, for longer while the sharing lasts") {
    AdaptiveSpin spin(50, shared_core);
    // A first failure only halves the budget (no probe: spins that win are not probed often).
    REQUIRE_FALSE(spin.run([] { return false; }));
    REQUIRE(spin.budget_us() == 25);
    REQUIRE(spin.backoff_left() == 0);
    // After a failure the probe comes once probe_after has passed; its answer ends the spin.
    int polls = 0;
    REQUIRE_FALSE(spin.run([&] { return ++polls < 0; }));
    REQUIRE(polls > 0);
    REQUIRE(spin.budget_us() == 0);
    REQUIRE(spin.backoff_left() == AdaptiveSpin::min_backoff);
    spin.reward();  // traffic seen elsewhere does not restart it early
    REQUIRE(spin.budget_us() == 0);
    polls = 0;
    for (int i = 0; i < AdaptiveSpin::min_backoff; ++i)
        REQUIRE_FALSE(spin.run([&] { return ++polls > 0; }));
    REQUIRE(polls == 0);  // the whole backoff slept at once
    REQUIRE(spin.backoff_left() == 0);
    // Still shared at the next probe: the backoff doubles.
    REQUIRE_FALSE(spin.run([] { return false; }));
    REQUIRE(spin.backoff_left() == 2 * AdaptiveSpin::min_backoff);
}

TEST_CASE("a neighbour that kept the CPU long makes the backoff long enough to pay for it") {
    AdaptiveSpin spin(50, busy_neighbour);
    REQUIRE_FALSE(spin.run([] { return false; }));  // a failure first: then the probe
    REQUIRE_FALSE(spin.run([] { return false; }));
    REQUIRE(spin.backoff_left() == 3000 / AdaptiveSpin::backoff_cost.count());
}

TEST_CASE("a spin that wins on its own core keeps spinning") {
    AdaptiveSpin spin(50, own_core);
    for (int i = 0; i < 100; ++i) {
        int polls = 0;
        REQUIRE(spin.run([&] { return ++polls == 2; }));
    }
    REQUIRE(spin.budget_us() == 50);
    REQUIRE(spin.backoff_left() == 0);
}

namespace {
// Keeps the CPU for `us` without a system call: time for another thread to get ready, or a
// yield that an interrupt or the hypervisor stretched, with no other task run meanwhile.
void hold_cpu(int us) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
}
}  // namespace

TEST_CASE("the real probe sees a busy thread on the same CPU") {
    // Both threads on the first CPU this process may use, the way two processes pinned to one
    // core share it.
    cpu_set_t allowed;
    REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &allowed)) ++cpu;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    cpu_set_t before;
    REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0);
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
    std::atomic<bool> stop{false};
    std::thread busy([&] {
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    // Give the busy thread time to become runnable on our CPU.
    hold_cpu(20'000);
    bool seen = false;
    for (int i = 0; i < 10 && !seen; ++i) seen = bmi::support::cpu_shared().count() > 0;
    stop = true;
    busy.join();
    pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    REQUIRE(seen);
}

TEST_CASE("a long yield that never switched tasks is no sharing") {
    // The probe takes a yield over the threshold for sharing only if the thread was switched
    // out meanwhile. A preemption inside one 50 us window is possible on a loaded machine (and
    // then it is sharing), so one clean answer out of five is what the rule must give.
    bool clean = false;
    for (int i = 0; i < 5 && !clean; ++i)
        clean = bmi::support::cpu_shared_around([] { hold_cpu(50); }).count() == 0;
    REQUIRE(clean);
}

TEST_CASE("a yield that switched away counts however it switched") {
    // nanosleep always blocks, which is a switch to another task (or the idle task): the probe
    // must report it, with its length.
    auto taken = bmi::support::cpu_shared_around([] {
        timespec pause{0, 200'000};
        nanosleep(&pause, nullptr);
    });
    REQUIRE(taken >= std::chrono::microseconds(200));
}
