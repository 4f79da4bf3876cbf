// SPDX-License-Identifier: LGPL-2.1-or-later
// The nameless-peer table of shm (shm_nameless_peers.hpp): one peer per (pid, nonce) while it
// lives, expired entries bounded, and a hello costs the same however many clients are held.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "methods/shm/shm_nameless_peers.hpp"

using namespace bmi::method::shm;

TEST_CASE("nameless peers: one per pid and nonce while it lives", "[shm][nameless]") {
    NamelessPeers table;
    auto a = table.find_or_add(100, 7);
    REQUIRE(a->pid == 100);
    REQUIRE(a->nonce == 7);
    CHECK(table.find_or_add(100, 7) == a);  // a second connection of the same instance
    auto b = table.find_or_add(100, 8);     // another instance of the same process
    CHECK(b != a);
    CHECK(table.find_pid(100) != nullptr);
    table.remove(*a);
    CHECK(table.find_or_add(100, 7) != a);  // forgotten: its next hello is a new peer
    CHECK(table.find_or_add(100, 8) == b);  // the other stays
    CHECK(table.find_pid(101) == nullptr);
}

TEST_CASE("nameless peers: expired entries do not pile up", "[shm][nameless]") {
    // Clients that connect and go without ever becoming an address leave only weak entries.
    NamelessPeers table;
    std::vector<std::shared_ptr<ShmPeer>> held;
    for (int i = 0; i < 100000; ++i) {
        auto peer = table.find_or_add(1000 + i, 1);
        if (i % 100 == 0) held.push_back(peer);  // 1 in 100 is kept, as a server keeps some
    }
    INFO(table.size() << " entries for " << held.size() << " live peers");
    CHECK(table.size() <= 2 * held.size() + 64);
    std::size_t live = 0;
    table.for_each_live([&](ShmPeer&) { ++live; });
    CHECK(live == held.size());
}

TEST_CASE("nameless peers: a hello costs the same however many clients are held",
          "[shm][nameless]") {
    // The list this table replaced was walked on every hello: 50,000 hellos with all their
    // peers held took seconds (quadratic). A table does them in milliseconds; 2 s is a bound
    // only a walk can miss, even under a sanitizer on a loaded machine.
    NamelessPeers table;
    std::vector<std::shared_ptr<ShmPeer>> held;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 50000; ++i) held.push_back(table.find_or_add(1000 + i, 42));
    for (int i = 0; i < 50000; ++i) REQUIRE(table.find_or_add(1000 + i, 42) == held[i]);
    const auto took = std::chrono::steady_clock::now() - start;
    INFO(std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    CHECK(took < std::chrono::seconds(2));
}
