// SPDX-License-Identifier: LGPL-2.1-or-later
// WatchedRings on real rings (shm_watched.hpp): which connections are watched, what their
// producers see, and that a connection no longer watched is visited for what it published
// meanwhile.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

#include "methods/shm/shm_watched.hpp"

using namespace bmi::method::shm;

namespace {
constexpr std::uint32_t slot_count = 8, slot_size = 64;

// A connection whose rx ring lives in ordinary memory, and the producer's view of that ring.
struct Watchable {
    Watchable()
        : control(new RingControl{}),
          slots(static_cast<std::byte*>(std::aligned_alloc(64, slot_count * slot_size))),
          producer(control.get(), slots, slot_count, slot_size) {
        std::fill(slots, slots + slot_count * slot_size, std::byte{0});
        conn.rx = Ring(control.get(), slots, slot_count, slot_size);
    }
    ~Watchable() { std::free(slots); }
    void publish_one() {
        producer.claim(1);
        producer.publish(1);
    }
    std::unique_ptr<RingControl> control;
    std::byte* slots;
    Ring producer;
    Connection conn;
};
}  // namespace

TEST_CASE("watched rings: a connection that brings messages is watched, and its producer "
          "sees it",
          "[shm][watched]") {
    Watchable a;
    WatchedRings watched;
    REQUIRE_FALSE(a.producer.consumer_watching());
    REQUIRE(watched.took_messages(a.conn, 1) == nullptr);
    CHECK(a.conn.watched);
    CHECK(a.producer.consumer_watching());
    REQUIRE(watched.connections().size() == 1);
    CHECK_FALSE(watched.any_message());
    a.publish_one();
    CHECK(watched.any_message());
    a.conn.stalled = true;  // held back by the quota: not worth a spin's attention
    CHECK_FALSE(watched.any_message());
    a.conn.stalled = false;
    // Taking more keeps it watched once.
    REQUIRE(watched.took_messages(a.conn, 2) == nullptr);
    CHECK(watched.connections().size() == 1);
    watched.forget(a.conn);
    CHECK_FALSE(a.conn.watched);
    CHECK(watched.connections().empty());
}

TEST_CASE("watched rings: when full, only a connection quiet long enough makes room",
          "[shm][watched]") {
    std::vector<std::unique_ptr<Watchable>> rings;
    for (std::uint32_t i = 0; i <= WatchedRings::capacity; ++i)
        rings.push_back(std::make_unique<Watchable>());
    WatchedRings watched;
    // The first capacity connections bring messages in passes 1..capacity.
    for (std::uint32_t i = 0; i < WatchedRings::capacity; ++i)
        REQUIRE(watched.took_messages(rings[i]->conn, 1 + i) == nullptr);
    Watchable& newcomer = *rings.back();
    Watchable& quietest = *rings.front();  // its last message came in pass 1

    // Everyone was active recently: the newcomer keeps ringing the doorbell.
    REQUIRE(watched.took_messages(newcomer.conn, 1 + WatchedRings::quiet_passes - 1) == nullptr);
    CHECK_FALSE(newcomer.conn.watched);
    CHECK_FALSE(newcomer.producer.consumer_watching());

    // Later, the quietest makes room. It published meanwhile, without ringing (it was
    // watched): that message must be visited, so it comes back.
    quietest.publish_one();
    const std::uint64_t later = 1 + WatchedRings::quiet_passes;
    REQUIRE(watched.took_messages(newcomer.conn, later) == &quietest.conn);
    CHECK(newcomer.conn.watched);
    CHECK(newcomer.producer.consumer_watching());
    CHECK_FALSE(quietest.conn.watched);
    CHECK_FALSE(quietest.producer.consumer_watching());  // it rings again
    CHECK(watched.connections().size() == WatchedRings::capacity);

    // Replacing one with nothing published returns nothing to visit.
    Watchable& second = *rings[1];  // last message in pass 2
    REQUIRE(watched.took_messages(quietest.conn, later + 1) == nullptr);
    CHECK_FALSE(second.conn.watched);
    CHECK(quietest.conn.watched);
}
