// SPDX-License-Identifier: LGPL-2.1-or-later
// The SPSC slot ring on its own: wrap-around, a full ring, and two threads moving many messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_ring.hpp"

using namespace bmi::method::shm;

namespace {
// Control block and slots in ordinary memory: the ring does not care where they live.
struct TestRing {
    TestRing(std::uint32_t slots, std::uint32_t slot_size)
        : control(new RingControl{}),
          storage(static_cast<std::byte*>(std::aligned_alloc(64, std::size_t{slots} * slot_size))),
          producer(control.get(), storage, slots, slot_size),
          consumer(control.get(), storage, slots, slot_size) {}
    ~TestRing() { std::free(storage); }
    std::unique_ptr<RingControl> control;
    std::byte* storage;
    Ring producer;
    Ring consumer;
};

std::uint32_t checksum(const std::byte* data, std::size_t size) {
    std::uint32_t sum = 2166136261u;
    for (std::size_t i = 0; i < size; ++i)
        sum = (sum ^ static_cast<std::uint32_t>(data[i])) * 16777619u;
    return sum;
}
}  // namespace

TEST_CASE("ring: messages spanning the end of the ring come back whole", "[shm][ring]") {
    TestRing ring(8, 256);
    // 3-slot messages on an 8-slot ring start at every position modulo 8 over time.
    for (int round = 0; round < 40; ++round) {
        std::vector<unsigned char> out(3 * 256 - ring_stamp_size), in(out.size());
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = static_cast<unsigned char>(round + i * 7);
        REQUIRE(ring.producer.free_slots() == 8);
        Window w = ring.producer.claim(3);
        REQUIRE(w.size() == out.size());
        w.write(0, out.data(), out.size());
        REQUIRE_FALSE(ring.consumer.has_message());  // claimed, not yet published
        ring.producer.publish(3);
        REQUIRE(ring.consumer.has_message());
        ring.consumer.peek(3).read(0, in.data(), in.size());
        REQUIRE(in == out);
        ring.consumer.release(3);
        REQUIRE_FALSE(ring.consumer.has_message());
    }
}

TEST_CASE("ring: payload bytes left in a slot never pass for a later message's stamp",
          "[shm][ring]") {
    TestRing ring(4, 256);
    // A 2-slot message at positions 0-1. Slot 1 starts with payload; put there exactly the
    // stamp a message at position 5 (slot 1 again, next lap) would carry.
    std::vector<std::uint64_t> out((2 * 256 - ring_stamp_size) / 8, 0);
    out[(256 - ring_stamp_size) / 8] = 5 + 1;
    ring.producer.claim(2).write(0, out.data(), out.size() * 8);
    ring.producer.publish(2);
    REQUIRE(ring.consumer.has_message());
    ring.consumer.release(2);
    for (int position = 2; position < 5; ++position) {  // one-slot messages at 2, 3, 4
        ring.producer.claim(1).write(0, &position, sizeof position);
        ring.producer.publish(1);
        REQUIRE(ring.consumer.has_message());
        ring.consumer.release(1);
    }
    // The consumer now expects position 5 (slot 1), which nobody published.
    REQUIRE_FALSE(ring.consumer.has_message());
    ring.producer.claim(1);
    ring.producer.publish(1);
    REQUIRE(ring.consumer.has_message());
}

TEST_CASE("ring: a full ring refuses more until the consumer releases", "[shm][ring]") {
    TestRing ring(4, 256);
    for (int i = 0; i < 4; ++i) {
        REQUIRE(ring.producer.free_slots() == static_cast<std::uint32_t>(4 - i));
        ring.producer.claim(1).write(0, &i, sizeof i);
        ring.producer.publish(1);
    }
    REQUIRE(ring.producer.free_slots() == 0);
    // The producer asks to be woken; with nothing released the re-check says "still full".
    REQUIRE_FALSE(ring.producer.block_producer(1));
    int first = -1;
    ring.consumer.peek(1).read(0, &first, sizeof first);
    REQUIRE(first == 0);
    ring.consumer.release(1);
    REQUIRE(ring.producer.free_slots() == 1);
    // The first message left the ring more than half free, so releasing it asks for no fence;
    // the last one before the producer blocked was tight, and releasing it finds the waiter.
    REQUIRE_FALSE(ring.consumer.producer_waiting());
    for (int i = 1; i < 4; ++i) ring.consumer.release(1);
    REQUIRE(ring.consumer.producer_waiting());
    ring.producer.unblock_producer();
    ring.producer.claim(1);
    ring.producer.publish(1);
    ring.consumer.release(1);
    REQUIRE_FALSE(ring.consumer.producer_waiting());
}

TEST_CASE("ring: a producer that blocks is always found by the consumer's next check",
          "[shm][ring]") {
    // Whatever the fill level, a producer waiting for up to half the ring was preceded by a
    // tight message; releasing everything published so far must report it.
    for (std::uint32_t published = 3; published <= 8; ++published) {
        TestRing ring(8, 256);
        for (std::uint32_t i = 0; i < published; ++i) {
            ring.producer.claim(1);
            ring.producer.publish(1);
        }
        std::uint32_t wanted = 8 - published + 1;  // one more than is free
        if (wanted > ring.producer.max_message_slots()) continue;
        REQUIRE_FALSE(ring.producer.block_producer(wanted));
        for (std::uint32_t i = 0; i < published; ++i) ring.consumer.release(1);
        REQUIRE(ring.consumer.producer_waiting());
    }
}

TEST_CASE("ring: a fast producer thread and a consumer thread move many messages intact",
          "[shm][ring]") {
    constexpr std::uint32_t slots = 16, slot_size = 256;
    constexpr int messages = 20000;
    TestRing ring(slots, slot_size);
    std::atomic<bool> failed{false};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);

    // Each message: [length u32][seed u32][checksum u32][payload...], 1..5 slots long.
    std::thread producer([&] {
        std::vector<std::byte> buffer(5 * slot_size);
        std::uint32_t x = 12345;
        const std::size_t longest = 5 * slot_size - ring_stamp_size;
        for (int m = 0; m < messages && !failed; ++m) {
            x = x * 1103515245u + 12345u;
            auto length = static_cast<std::uint32_t>(12 + x % (longest - 12));
            for (std::uint32_t i = 12; i < length; ++i)
                buffer[i] = static_cast<std::byte>((x >> (i % 24)) + i);
            std::uint32_t sum = checksum(buffer.data() + 12, length - 12);
            std::memcpy(buffer.data(), &length, 4);
            std::memcpy(buffer.data() + 4, &m, 4);
            std::memcpy(buffer.data() + 8, &sum, 4);
            std::uint32_t need = ring.producer.slots_for(length);
            while (ring.producer.free_slots() < need) {
                if (std::chrono::steady_clock::now() > deadline) {
                    failed = true;
                    return;
                }
                std::this_thread::yield();
            }
            ring.producer.claim(need).write(0, buffer.data(), length);
            ring.producer.publish(need);
        }
    });
    std::vector<std::byte> buffer(5 * slot_size);
    int received = 0;
    while (received < messages && !failed) {
        if (!ring.consumer.has_message()) {
            if (std::chrono::steady_clock::now() > deadline) failed = true;
            std::this_thread::yield();
            continue;
        }
        std::uint32_t length = 0, index = 0, sum = 0;
        ring.consumer.peek(1).read(0, &length, 4);
        if (length < 12 || length > buffer.size()) {
            failed = true;
            break;
        }
        std::uint32_t need = ring.consumer.slots_for(length);
        ring.consumer.peek(need).read(0, buffer.data(), length);
        std::memcpy(&index, buffer.data() + 4, 4);
        std::memcpy(&sum, buffer.data() + 8, 4);
        if (index != static_cast<std::uint32_t>(received) ||
            sum != checksum(buffer.data() + 12, length - 12))
            failed = true;
        ring.consumer.release(need);
        ++received;
    }
    producer.join();
    REQUIRE_FALSE(failed.load());
    REQUIRE(received == messages);
}

TEST_CASE("ring records: the largest payload a sender may place is exactly the largest a "
          "receiver accepts",
          "[shm][ring]") {
    // For each geometry, an EAGER record carrying ring_payload_limit bytes (half the ring,
    // less stamp and header) passes check_record, and one byte more (one slot more) does not;
    // a record whose slot count disagrees with its size fails either way.
    auto [slots, slot_size] = GENERATE(std::pair<std::uint32_t, std::uint32_t>{4, 256},
                                       std::pair<std::uint32_t, std::uint32_t>{8, 512},
                                       std::pair<std::uint32_t, std::uint32_t>{64, 256},
                                       std::pair<std::uint32_t, std::uint32_t>{64, 8192});
    TestRing ring(slots, slot_size);
    const long long limit = ring_payload_limit(ring.consumer);
    CHECK(limit == static_cast<long long>(slots / 2) * slot_size - 40);
    // EAGER carries at most 16 KiB whatever the ring: the largest the check can take.
    const auto payload = static_cast<std::uint64_t>(std::min<long long>(limit, 16 << 10));
    MsgHeader fits{static_cast<std::uint32_t>(MsgType::eager),
                   1,
                   ring.consumer.slots_for(header_size + payload),
                   0,
                   payload,
                   0};
    CHECK(fits.slots <= ring.consumer.max_message_slots());
    CHECK(check_record(ring.consumer, fits) == static_cast<long long>(payload));
    if (payload == static_cast<std::uint64_t>(limit)) {
        MsgHeader over = fits;
        over.size = payload + 1;
        over.slots = ring.consumer.slots_for(header_size + payload + 1);
        CHECK(over.slots == ring.consumer.max_message_slots() + 1);
        CHECK(check_record(ring.consumer, over) == -1);
    }
    MsgHeader wrong = fits;
    wrong.slots = fits.slots + 1;
    CHECK(check_record(ring.consumer, wrong) == -1);
}

TEST_CASE("hello: the unexpected limit a hello or reply states is 1 byte to 1 GiB", "[shm]") {
    Hello hello{};
    hello.magic = hello_magic;
    hello.version = protocol_version;
    hello.slot_count = 16;
    hello.slot_size = 4096;
    hello.unexpected_limit = default_unexpected_limit;
    CHECK(hello_well_formed(hello));
    hello.unexpected_limit = 0;
    CHECK_FALSE(hello_well_formed(hello));
    hello.unexpected_limit = max_stated_unexpected_limit + 1;
    CHECK_FALSE(hello_well_formed(hello));
    HelloReply reply{};
    reply.magic = hello_magic;
    reply.version = protocol_version;
    reply.unexpected_limit = max_stated_unexpected_limit;
    CHECK(reply_well_formed(reply));
    reply.unexpected_limit = 0;
    CHECK_FALSE(reply_well_formed(reply));
}
