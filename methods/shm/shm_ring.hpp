// SPDX-License-Identifier: LGPL-2.1-or-later
// A single-producer single-consumer ring of fixed-size slots living in shared memory.
//
// head and tail are free-running slot counters (never wrapped), each written by one side only
// and kept on its own cache line so the two processes do not bounce one line between them. The
// producer fills slots, then publishes them with a release store of head; the consumer reads
// head with acquire, copies out, then returns the slots with a release store of tail. No locks.
//
// Each side also owns one flag the other side reads for the wake-up protocol:
// consumer_sleeping (the consumer is about to block: write its eventfd after publishing) and
// producer_blocked (the producer waits for space: write its eventfd after releasing). Both use
// the store / seq_cst fence / load pattern, so at least one side always sees the other.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace bmi::method::shm {

struct RingControl {
    alignas(64) std::atomic<std::uint64_t> head;  // producer-written
    std::atomic<std::uint32_t> producer_blocked;
    alignas(64) std::atomic<std::uint64_t> tail;  // consumer-written
    std::atomic<std::uint32_t> consumer_sleeping;
};
static_assert(sizeof(RingControl) == 128);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics must not hide a lock");

// A view of `count` consecutive slots: at most two contiguous pieces (the ring may wrap).
struct Window {
    std::byte* first = nullptr;
    std::size_t first_size = 0;
    std::byte* second = nullptr;
    std::size_t second_size = 0;

    std::size_t size() const { return first_size + second_size; }
    void write(std::size_t offset, const void* source, std::size_t length) const;
    void read(std::size_t offset, void* target, std::size_t length) const;
};

class Ring {
public:
    Ring() = default;
    Ring(RingControl* control, std::byte* slots, std::uint32_t slot_count,
         std::uint32_t slot_size);

    std::uint32_t slot_count() const { return slot_count_; }
    std::uint32_t slot_size() const { return slot_size_; }
    std::uint32_t slots_for(std::size_t bytes) const {
        return static_cast<std::uint32_t>((bytes + slot_size_ - 1) / slot_size_);
    }

    // --- producer side ---
    // Exact count of free slots (reads the consumer's index).
    std::uint32_t free_slots();
    // True if `wanted` slots are free; reads the consumer's index only when the cached copy
    // says there is not enough room.
    bool has_room(std::uint32_t wanted);
    // The next `count` unpublished slots (count <= free_slots()).
    Window claim(std::uint32_t count) const;
    void publish(std::uint32_t count);
    // Marks the producer as waiting for space; true if space appeared meanwhile (re-check).
    bool block_producer(std::uint32_t wanted);
    void unblock_producer();
    bool consumer_sleeping() const;

    // --- consumer side ---
    std::uint32_t used_slots() const;
    // `count` slots from the oldest unconsumed one (count <= used_slots()).
    Window peek(std::uint32_t count) const;
    void release(std::uint32_t count);
    // Marks the consumer as sleeping; true if data arrived meanwhile (re-check).
    bool sleep_consumer();
    void wake_consumer();
    bool producer_blocked() const;

private:
    Window window(std::uint64_t start, std::uint32_t count) const;

    RingControl* control_ = nullptr;
    std::byte* slots_ = nullptr;
    std::uint32_t slot_count_ = 0;
    std::uint32_t slot_size_ = 0;
    // The index this side writes, mirrored locally (only we change it), and a cached copy of
    // the other side's index so the common case reads no shared cache line.
    std::uint64_t own_ = 0;
    std::uint64_t cached_other_ = 0;
};

}  // namespace bmi::method::shm
