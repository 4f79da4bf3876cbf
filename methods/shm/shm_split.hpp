// SPDX-License-Identifier: LGPL-2.1-or-later
// Split copies: a large message that both processes copy at once, each part of it.
//
// One cross-process copy runs at the speed of one CPU; a ping-pong or a client waiting for a
// reply leaves the other process's CPU idle meanwhile. So once a receive matches a large
// message, the receiver cuts it into chunks and asks the sender for help (HELP, with the
// receiver's buffer): the receiver reads chunks from the sender's buffer (process_vm_readv),
// the sender writes chunks into the receiver's buffer (process_vm_writev) whenever it polls.
// Who copies which chunk is decided by one counter per transfer on the receiver's split board
// in the shared segment; a compare-and-swap hands out each chunk once, so a sender that is
// busy elsewhere simply copies less and a sender that never answers copies nothing.
//
// The counter holds the transfer's generation in its high half, so a sender that shows up
// late, when the entry already serves another transfer, claims nothing. The sender counts the
// chunks it finished in `pushed`; the receiver completes once every chunk is claimed, its own
// are copied and pushed equals the sender's share, and then answers DONE. A sender that cannot
// write (the kernel refuses, the buffer is bad) sets push_failed and stops; the receiver then
// reads the whole message itself. Before a receive may end otherwise (cancel, a closing
// connection), the receiver takes every unclaimed chunk for itself and waits until the
// sender's claimed chunks are written, so nothing lands in a buffer after its receive ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "methods/method.hpp"
#include "methods/shm/shm_region.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

// One transfer's shared state, on the receiving side's board.
struct SplitBoardEntry {
    alignas(64) std::atomic<std::uint64_t> claims;  // generation << 32 | next chunk to hand out
    std::atomic<std::uint32_t> pushed;              // chunks the sender has written
    std::atomic<std::uint32_t> push_failed;         // the sender stopped after a failed write
};
static_assert(sizeof(SplitBoardEntry) == 64);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

inline constexpr std::uint32_t split_board_entries = 16;

// Hands out the next chunk of transfer `generation`; false once none is left or the entry
// serves another transfer.
inline bool claim_chunk(SplitBoardEntry& entry, std::uint32_t generation, std::uint32_t chunks,
                        std::uint32_t& index) {
    std::uint64_t value = entry.claims.load(std::memory_order_acquire);
    for (;;) {
        if ((value >> 32) != generation || (value & 0xffffffffu) >= chunks) return false;
        if (entry.claims.compare_exchange_weak(value, value + 1, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
            index = static_cast<std::uint32_t>(value & 0xffffffffu);
            return true;
        }
    }
}

// Receiver: hands out nothing more; returns how many chunks had been handed out in all.
inline std::uint32_t close_claims(SplitBoardEntry& entry, std::uint32_t generation,
                                  std::uint32_t chunks) {
    std::uint64_t value = entry.claims.load(std::memory_order_acquire);
    for (;;) {
        auto taken = static_cast<std::uint32_t>(value & 0xffffffffu);
        if ((value >> 32) != generation || taken >= chunks) return taken < chunks ? taken : chunks;
        std::uint64_t closed = (std::uint64_t{generation} << 32) | chunks;
        if (entry.claims.compare_exchange_weak(value, closed, std::memory_order_acq_rel,
                                               std::memory_order_acquire))
            return taken;
    }
}

// A chunk the receiver claimed and copies over several progress steps, so that no step of a
// large chunk keeps the receiver's other connections waiting. (The sender copies each chunk it
// claims within one step: a sender that stops calling in must never hold up the receive.)
struct ChunkInHand {
    std::uint32_t index = 0;
    std::uint64_t copied = 0;  // bytes of it done
    bool held = false;         // claimed and not yet all copied
};

// The receiving side of a split copy.
struct SplitReceive {
    Operation* op = nullptr;
    std::uint64_t cookie = 0;       // the sender's name for the message
    std::vector<RemoteIov> source;  // the sender's buffer
    bmi_size_t size = 0;
    std::uint32_t entry = 0;  // on our board
    std::uint32_t generation = 0;
    std::uint64_t chunk_size = 0;
    std::uint32_t chunks = 0;
    std::uint32_t own = 0;           // chunks we claimed (and copied, or are copying)
    ChunkInHand in_hand;             // the one of them we are copying
    bool claims_done = false;        // nothing left to claim
    bool cancelled = false;          // complete with -BMI_ECANCEL once the sender is out
    std::uint32_t sender_share = 0;  // valid once claims_done: chunks the sender claimed
    std::uint64_t started_ns = 0;    // monotonic time the receiver chose split; 0: not timed
    bool helped = true;              // the sender was asked (HELP); false: we copy every chunk
    // The sender's buffer mapped here (shm_region.hpp): chunks are memcpy'd, not read
    // through the kernel. Empty: process_vm_readv.
    std::vector<Segment> mapped_source;
    PeerRegions::Keep keep;
};

// The sending side: chunks we write into the receiver's buffer while any are left.
struct SplitPush {
    Operation* op = nullptr;
    std::uint32_t entry = 0;  // on the receiver's board
    std::uint32_t generation = 0;
    std::uint64_t chunk_size = 0;
    std::uint32_t chunks = 0;
    std::vector<RemoteIov> target;       // the receiver's buffer
    std::vector<Segment> mapped_target;  // the same, mapped here; empty: process_vm_writev
    PeerRegions::Keep keep;
};

}  // namespace bmi::method::shm
