// SPDX-License-Identifier: LGPL-2.1-or-later
// The doorbell on its own (shm_doorbell.hpp): what a ring shows the owner, the sleeping flag's
// re-check that closes the lost wake-up window, the index free-list, and what attach refuses.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "methods/shm/shm_doorbell.hpp"
#include "methods/shm/shm_memfd.hpp"

using namespace bmi::method::shm;

namespace {
// The owner's doorbell and a peer's mapping of it, as two processes would hold them.
struct Pair {
    Pair() {
        REQUIRE(owner.create() == 0);
        REQUIRE(peer.attach(dup(owner.fd())) == 0);
    }
    Doorbell owner;
    Doorbell peer;
};

std::vector<std::uint32_t> taken(Doorbell& bell, std::uint32_t words = doorbell_summary_words) {
    std::vector<std::uint32_t> out;
    bell.take(words, [&](std::uint32_t index) { out.push_back(index); });
    return out;
}
}  // namespace

TEST_CASE("doorbell: the owner takes exactly the bits peers rang, once", "[shm][doorbell]") {
    Pair bells;
    REQUIRE(taken(bells.owner).empty());
    for (std::uint32_t index : {0u, 63u, 64u, 4095u, 4096u, doorbell_capacity - 1}) {
        REQUIRE_FALSE(bells.peer.ring(index));  // nobody sleeps
    }
    bells.peer.ring(64);  // twice: one visit
    auto got = taken(bells.owner);
    REQUIRE(got == std::vector<std::uint32_t>{0, 63, 64, 4095, 4096, doorbell_capacity - 1});
    REQUIRE(taken(bells.owner).empty());
    REQUIRE_FALSE(bells.owner.rung(doorbell_summary_words));
}

TEST_CASE("doorbell: only the summary words in use are looked at", "[shm][doorbell]") {
    Pair bells;
    bells.peer.ring(5000);  // summary word 1
    REQUIRE_FALSE(bells.owner.rung(1));
    REQUIRE(taken(bells.owner, 1).empty());
    REQUIRE(bells.owner.rung(2));
    REQUIRE(taken(bells.owner, 2) == std::vector<std::uint32_t>{5000});
}

TEST_CASE("doorbell: the sleeping flag and its re-check close the lost wake-up window",
          "[shm][doorbell]") {
    Pair bells;
    REQUIRE_FALSE(bells.owner.sleep(1));  // nothing rung: really asleep
    REQUIRE(bells.peer.ring(7));          // so the ringer must write the eventfd
    bells.owner.wake();
    taken(bells.owner);
    REQUIRE_FALSE(bells.peer.ring(8));  // awake: no eventfd
    REQUIRE(bells.owner.sleep(1));      // rung before the flag: the owner must not block
}

TEST_CASE("doorbell: a ringing thread is never missed by a sleeping one", "[shm][doorbell]") {
    // The store/load pattern of shm_doorbell.hpp, raced: each round the owner either sees the
    // ring in its re-check or the ringer sees the flag. Both missing is a lost wake-up.
    Pair bells;
    constexpr int rounds = 5000;
    std::atomic<int> round{-1};  // -1: between rounds
    std::atomic<int> ringer_saw{-1};
    std::thread ringer([&] {
        for (int r = 0; r < rounds; ++r) {
            while (round.load(std::memory_order_acquire) != r) std::this_thread::yield();
            ringer_saw.store(bells.peer.ring(1) ? r : -1 - r, std::memory_order_release);
            while (round.load(std::memory_order_acquire) == r) std::this_thread::yield();
        }
    });
    int lost = 0;
    for (int r = 0; r < rounds; ++r) {
        bells.owner.wake();
        taken(bells.owner);
        ringer_saw.store(-2 - rounds, std::memory_order_relaxed);
        round.store(r, std::memory_order_release);
        bool owner_saw = bells.owner.sleep(1);
        int seen;
        while ((seen = ringer_saw.load(std::memory_order_acquire)) == -2 - rounds)
            std::this_thread::yield();
        if (!owner_saw && seen != r) ++lost;
        round.store(-1, std::memory_order_release);  // between rounds: the ringer waits
    }
    ringer.join();
    REQUIRE(lost == 0);
}

TEST_CASE("doorbell: indices are reused lowest first, and run out", "[shm][doorbell]") {
    DoorbellIndices indices;
    REQUIRE(indices.summary_words() == 0);
    REQUIRE(indices.take() == 0);
    REQUIRE(indices.take() == 1);
    REQUIRE(indices.take() == 2);
    REQUIRE(indices.summary_words() == 1);
    indices.give_back(1);
    indices.give_back(0);
    REQUIRE(indices.take() == 0);
    REQUIRE(indices.take() == 1);
    REQUIRE(indices.take() == 3);
    while (indices.take() >= 0) {
    }
    REQUIRE(indices.summary_words() == doorbell_summary_words);
    indices.give_back(40000);
    REQUIRE(indices.take() == 40000);
    REQUIRE(indices.take() == -1);
}

TEST_CASE("doorbell: attach refuses a memfd of another size, an unsealed one, a stranger",
          "[shm][doorbell]") {
    Doorbell bell;
    int small = create_sealed_memfd("test", sizeof(DoorbellLayout) - 64);
    REQUIRE(small >= 0);
    REQUIRE(bell.attach(small) < 0);
    int unsealed = memfd_create("test", MFD_CLOEXEC);
    REQUIRE(ftruncate(unsealed, sizeof(DoorbellLayout)) == 0);
    REQUIRE(bell.attach(unsealed) < 0);
    int zeros = create_sealed_memfd("test", sizeof(DoorbellLayout));  // no magic
    REQUIRE(bell.attach(zeros) < 0);
    REQUIRE_FALSE(bell.mapped());
}
