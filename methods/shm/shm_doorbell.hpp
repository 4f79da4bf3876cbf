// SPDX-License-Identifier: LGPL-2.1-or-later
// The doorbell: one small shared segment per shm instance that says which of its connections
// have news, so progress visits those and not every connection (issue 18: a server with 10,000
// idle clients must answer one of them as fast as a server with one).
//
// Every connection we accept or open gets an index here (a free-list hands them out and takes
// them back on close); the hello and its reply carry our doorbell's memfd and the index, so the
// peer learns where to ring. A peer rings after it publishes into the ring towards us and after
// it changes anything else we watch without the socket (the split-copy counters): it sets the
// connection's bit (fetch_or on one word of `bits`), then the word's bit in `summary`. We take
// the summary words that are set (exchange(0)), then the bit words they name (exchange(0)),
// and only then read those connections' rings: a message published after our read rings again
// and is seen on the next pass; one published before it is seen by the read. Taking a bit
// with acquire makes the ring writes the ringer released before ringing visible.
//
// The same segment carries the one `sleeping` flag of the instance, which replaced a flag per
// ring: before it blocks, the instance stores 1 into it and then looks at the summary words;
// a ringer sets its summary bit and then looks at `sleeping`, writing our eventfd when it is
// set. All four accesses are seq_cst, so they fall into one total order: if our look misses
// the summary bit, the ringer's look comes after our store and sees the flag (the store /
// load pattern of shm_ring.hpp, with the summary word in the place of the stamp). Setting or
// clearing it costs O(1) per sleep, where a flag per ring cost a store to every connection.
//
// A peer is a process of our own user and maps this segment: it can ring bits that are not
// its own (we visit a connection for nothing) or clear bits (a message waits unseen). Neither
// costs more than time: a periodic sweep of every connection (shm_progress.cpp) bounds how
// long a message whose bit was lost can wait, and every index it reads is in range by
// construction (the segment's size is fixed by the protocol).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

inline constexpr std::uint32_t doorbell_words = doorbell_capacity / 64;
inline constexpr std::uint32_t doorbell_summary_words = doorbell_words / 64;
inline constexpr std::uint32_t bits_per_summary_word = 64 * 64;

struct DoorbellLayout {
    std::uint32_t magic;
    std::uint32_t version;
    alignas(64) std::atomic<std::uint32_t> sleeping;  // written by the owner only
    // 1 + the CPU the owner last began a wait on (0: not known yet, or an older libbmi). In
    // sleeping's line, so the summary words keep their offsets.
    std::atomic<std::uint32_t> waiting_cpu;
    alignas(64) std::atomic<std::uint64_t> summary[doorbell_summary_words];
    alignas(64) std::atomic<std::uint64_t> bits[doorbell_words];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

class Doorbell {
public:
    Doorbell() = default;
    ~Doorbell();
    Doorbell(Doorbell&& other) noexcept;
    Doorbell& operator=(Doorbell&& other) noexcept;
    Doorbell(const Doorbell&) = delete;
    Doorbell& operator=(const Doorbell&) = delete;

    // Ours: a new zeroed, sealed segment; fd() stays open (every hello passes it). 0 or -BMI_E*.
    int create();
    // A peer's: maps fd after checking its seals, size and header; takes fd (closed). 0 or
    // -BMI_EPROTO / -BMI_E*.
    int attach(int fd);
    bool mapped() const { return layout_ != nullptr; }
    int fd() const { return fd_; }

    // --- a peer ringing us (index < doorbell_capacity: checked with the hello) ---
    // Sets the bit, then its summary bit; true if the owner sleeps and must be woken.
    bool ring(std::uint32_t index) {
        layout_->bits[index / 64].fetch_or(std::uint64_t{1} << (index % 64),
                                           std::memory_order_acq_rel);
        std::uint32_t word = index / 64;
        layout_->summary[word / 64].fetch_or(std::uint64_t{1} << (word % 64),
                                             std::memory_order_seq_cst);
        return layout_->sleeping.load(std::memory_order_seq_cst) != 0;
    }

    // --- the owner ---
    // Calls visit(index) for every bit rung since the last take, among the first
    // `summary_words` summary words (the ones indices in use can reach).
    template <class Visit>
    void take(std::uint32_t summary_words, Visit&& visit) {
        for (std::uint32_t s = 0; s < summary_words; ++s) {
            if (layout_->summary[s].load(std::memory_order_relaxed) == 0) continue;
            std::uint64_t words = layout_->summary[s].exchange(0, std::memory_order_acquire);
            while (words != 0) {
                std::uint32_t w = s * 64 + static_cast<std::uint32_t>(__builtin_ctzll(words));
                words &= words - 1;
                std::uint64_t rung = layout_->bits[w].exchange(0, std::memory_order_acquire);
                while (rung != 0) {
                    visit(w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(rung)));
                    rung &= rung - 1;
                }
            }
        }
    }
    // True if anything was rung and not taken yet (a cheap look, for spinning).
    bool rung(std::uint32_t summary_words) const {
        for (std::uint32_t s = 0; s < summary_words; ++s)
            if (layout_->summary[s].load(std::memory_order_seq_cst) != 0) return true;
        return false;
    }
    // About to block: peers must write our eventfd from now on. True if something was rung
    // meanwhile (then do not block; call wake()).
    bool sleep(std::uint32_t summary_words) {
        layout_->sleeping.store(1, std::memory_order_seq_cst);
        return rung(summary_words);
    }
    // A peer's, after a publication into a ring we watch (shm_watched.hpp) and a fence:
    // true if the owner sleeps and must be woken through its eventfd.
    bool owner_sleeping() const { return layout_->sleeping.load(std::memory_order_relaxed) != 0; }
    void wake() {
        if (layout_->sleeping.load(std::memory_order_relaxed) != 0)
            layout_->sleeping.store(0, std::memory_order_relaxed);
    }
    // The owner's, as a wait begins: the CPU it waits on, for peers deciding whether to spin.
    void note_waiting_cpu(int cpu) {
        const auto value = static_cast<std::uint32_t>(cpu + 1);
        // Stored only when it changes: the peers read this line, and a store takes it from them.
        if (layout_->waiting_cpu.load(std::memory_order_relaxed) != value)
            layout_->waiting_cpu.store(value, std::memory_order_relaxed);
    }
    // A peer's: true if the owner last waited on cpu. A hint only: a wrong value (a migration
    // since, or a peer that lies) costs one spin more or less, never a message.
    bool owner_waits_on(int cpu) const {
        return layout_->waiting_cpu.load(std::memory_order_relaxed) ==
               static_cast<std::uint32_t>(cpu + 1);
    }

private:
    void unmap();

    DoorbellLayout* layout_ = nullptr;
    int fd_ = -1;
};

// The indices of our doorbell: the lowest free one first, so the summary words that need a
// look stay few (one per 4,096 connections at the high-water mark).
class DoorbellIndices {
public:
    // An index, or -1 when all doorbell_capacity are in use.
    long take();
    void give_back(std::uint32_t index);
    // Summary words that an index in use (now or before) can reach.
    std::uint32_t summary_words() const {
        return (high_water_ + bits_per_summary_word - 1) / bits_per_summary_word;
    }

private:
    std::vector<std::uint32_t> free_;  // a min-heap
    std::uint32_t high_water_ = 0;     // indices below it were handed out at least once
};

}  // namespace bmi::method::shm
