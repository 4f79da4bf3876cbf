// SPDX-License-Identifier: LGPL-2.1-or-later
// A single-producer single-consumer ring of fixed-size slots living in shared memory.
//
// A message occupies one or more consecutive slots (at most half the ring) and starts with an
// 8-byte stamp that only the ring writes: the producer fills the slots, then stores the stamp
// (position + 1, shifted left by one) with release; the consumer polls the stamp of the slot
// it expects next with acquire. Polling the message
// itself, instead of a separate head index, means a waiting consumer pays one cache-line
// transfer per message (the line that holds the stamp, the header and a small payload), not
// two in a row. A slot that held the middle of an older message may contain any payload
// bytes where a stamp would be; the consumer zeroes those words before it returns the slots,
// so only a real publication can ever match. Positions are free-running 64-bit counters.
//
// tail (consumer-written) tells the producer which slots are free; the producer reads it only
// when its cached copy says the ring is full.
//
// The stamp's low bit says "tight": fewer than half the slots were free after this message.
// A producer only ever waits for at most half the ring, so the last message it published
// before waiting is tight, and the consumer needs its fence-and-look at producer_blocked only
// after it has released a tight message. A ring that never fills up (request/response
// traffic) therefore costs the consumer no fence at all. The producer owns one flag the
// consumer reads for the wake-up protocol, on its own cache line so that reading it costs no
// transfer while it does not change: producer_blocked (the producer waits for space: write its
// eventfd after releasing). It uses the store / seq_cst fence / load pattern, so at least one
// side always sees the other. The consumer's "I am about to block" is not per ring: it is the
// one `sleeping` flag of the consumer's doorbell (shm_doorbell.hpp), same pattern. No locks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace bmi::method::shm {

// The full fence between a store of ours and a load of the peer's flag (the rings' Dekker
// handshakes). ThreadSanitizer does not model fences (gcc warns so): under it, a seq_cst
// read-modify-write of one word gives the same order in the model TSan checks.
inline void full_fence() {
#if defined(__SANITIZE_THREAD__)
    static std::atomic<unsigned> word{0};
    word.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

struct RingControl {
    alignas(64) std::atomic<std::uint64_t> tail;  // consumer-written
    alignas(64) std::atomic<std::uint32_t> producer_blocked;
    // Consumer-written, rarely: 1 while the consumer polls this ring's stamps on every pass,
    // so the producer need not ring its doorbell after publishing (shm_watched.hpp). Its own
    // line, so that the producer's look at it costs no transfer while it does not change.
    alignas(64) std::atomic<std::uint32_t> consumer_watches;
};
static_assert(sizeof(RingControl) == 192);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process atomics must not hide a lock");

// Bytes at the start of every message that belong to the ring (the stamp).
inline constexpr std::size_t ring_stamp_size = 8;

// A view of `count` consecutive slots: at most two contiguous pieces (the ring may wrap).
struct Window {
    std::byte* first = nullptr;
    std::size_t first_size = 0;
    std::byte* second = nullptr;
    std::size_t second_size = 0;

    std::size_t size() const { return first_size + second_size; }
    void write(std::size_t offset, const void* source, std::size_t length) const {
        if (offset + length <= first_size && length > 0)
            std::memcpy(first + offset, source, length);  // the common case: no wrap
        else
            write_split(offset, source, length);
    }
    void read(std::size_t offset, void* target, std::size_t length) const {
        if (offset + length <= first_size && length > 0)
            std::memcpy(target, first + offset, length);
        else
            read_split(offset, target, length);
    }

private:
    void write_split(std::size_t offset, const void* source, std::size_t length) const;
    void read_split(std::size_t offset, void* target, std::size_t length) const;
};

class Ring {
public:
    Ring() = default;
    // slot_count and slot_size are powers of two (shm_wire.hpp, valid_geometry).
    Ring(RingControl* control, std::byte* slots, std::uint32_t slot_count, std::uint32_t slot_size);

    std::uint32_t slot_count() const { return slot_count_; }
    std::uint32_t slot_size() const { return slot_size_; }
    // Slots a message of `bytes` needs, the stamp included.
    std::uint32_t slots_for(std::size_t bytes) const {
        return static_cast<std::uint32_t>((ring_stamp_size + bytes + slot_size_ - 1) >>
                                          slot_shift_);
    }

    // --- producer side ---
    // Exact count of free slots (reads the consumer's index).
    std::uint32_t free_slots();
    // True if `wanted` slots are free; reads the consumer's index only when the cached copy
    // says there is not enough room.
    bool has_room(std::uint32_t wanted) {
        if (slot_count_ - (own_ - cached_other_) >= wanted) return true;
        return free_slots() >= wanted;
    }
    // The next `count` unpublished slots (count <= free_slots(), count <= max_message_slots()),
    // without the stamp: offset 0 is the first byte after it.
    Window claim(std::uint32_t count) const { return window(own_, count); }
    // Publishes the claimed message of `count` slots (stamps it).
    void publish(std::uint32_t count) {
        // The cached tail is never ahead of the real one, so this errs towards "tight".
        bool tight = slot_count_ - (own_ + count - cached_other_) < max_message_slots();
        stamp_at(own_).store(((own_ + 1) << 1) | (tight ? 1 : 0), std::memory_order_release);
        own_ += count;
    }
    std::uint32_t max_message_slots() const { return slot_count_ / 2; }
    // After a publish: true if the consumer polls this ring, so it will find the message
    // without a doorbell. The fence pairs with stop_watching's: either the consumer's last
    // look sees our stamp, or we see that it stopped watching and ring.
    bool consumer_watching() const {
        full_fence();
        return control_->consumer_watches.load(std::memory_order_relaxed) != 0;
    }
    // Marks the producer as waiting for `wanted` (<= max_message_slots()) free slots; true if
    // they appeared meanwhile (re-check).
    bool block_producer(std::uint32_t wanted);
    void unblock_producer();

    // --- consumer side ---
    // True if the next message has been published.
    bool has_message() const {
        return stamp_at(own_).load(std::memory_order_acquire) >> 1 == own_ + 1;
    }
    // `count` slots of the next message, without the stamp (count <= slot_count()).
    Window peek(std::uint32_t count) const { return window(own_, count); }
    // Returns the `count` slots of the message just read to the producer.
    void release(std::uint32_t count);
    // After releases: true if the producer waits for space and must be woken. Costs a fence
    // only if a tight message was released since the last call.
    bool producer_waiting();
    // Tells the producer that we poll this ring (it may skip our doorbell) or no longer do.
    // stop_watching returns has_message() as seen after the fence: true means a message the
    // producer may not have rung for.
    void start_watching() { control_->consumer_watches.store(1, std::memory_order_relaxed); }
    bool stop_watching() {
        control_->consumer_watches.store(0, std::memory_order_relaxed);
        full_fence();
        return has_message();
    }
    // Messages consumed so far: tells whether a visit took any.
    std::uint64_t consumed() const { return own_; }
    // Producer: slots the consumer has freed so far (its tail); a load of the shared line, for
    // the send deadline's wake-ups only.
    std::uint64_t peer_consumed() const { return control_->tail.load(std::memory_order_relaxed); }

private:
    Window window(std::uint64_t start, std::uint32_t count) const {
        Window w;
        auto position = static_cast<std::uint32_t>(start & (slot_count_ - 1));
        std::uint32_t first = count < slot_count_ - position ? count : slot_count_ - position;
        w.first = slots_ + (static_cast<std::size_t>(position) << slot_shift_) + ring_stamp_size;
        w.first_size = static_cast<std::size_t>(first) * slot_size_ - ring_stamp_size;
        if (count > first) {
            w.second = slots_;
            w.second_size = static_cast<std::size_t>(count - first) * slot_size_;
        }
        return w;
    }
    std::atomic_ref<std::uint64_t> stamp_at(std::uint64_t position) const {
        auto* word = reinterpret_cast<std::uint64_t*>(
            slots_ + (static_cast<std::size_t>(position & (slot_count_ - 1)) << slot_shift_));
        return std::atomic_ref<std::uint64_t>(*word);
    }

    RingControl* control_ = nullptr;
    std::byte* slots_ = nullptr;
    std::uint32_t slot_count_ = 0;  // a power of two: positions wrap with a mask
    std::uint32_t slot_size_ = 0;   // a power of two: no division on the message path
    std::uint32_t slot_shift_ = 0;  // log2(slot_size_)
    // The position this side is at (only we change it), and a cached copy of the consumer's
    // tail on the producer side, so the common case reads no shared cache line.
    std::uint64_t own_ = 0;
    std::uint64_t cached_other_ = 0;
    bool released_tight_ = false;  // consumer: a tight message was released, not yet checked
};

}  // namespace bmi::method::shm
