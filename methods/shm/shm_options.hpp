// SPDX-License-Identifier: LGPL-2.1-or-later
// Tunables of the shm method, from the instance's settings. shm_settings.cpp has each one's
// environment variable, option key, default and range; only load_options sets them here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bmi-types.h"
#include "methods/early_budget.hpp"
#include "methods/shm/shm_region.hpp"
#include "support/settings/settings.hpp"

namespace bmi::method::shm {

enum class SplitMode : std::uint8_t {
    never,     // 0: the receiver reads alone or the sender streams
    always,    // 1: split whenever the kernel allows cross-memory copies (or the source is mapped)
    adaptive,  // auto: split or the other path, whichever this receiver has timed faster
};

// What one peer can make us hold (doc/methods/shm.md, "Limits a peer cannot exceed"). Read
// strictly: a malformed value fails BMI_initialize with -BMI_EINVAL.
struct Budgets {
    // Eager messages that arrived before their receive was posted, kept per peer (bytes,
    // messages) and over all peers (bytes). Over a budget the peer's ring is not read until
    // receives take some: its sends wait, our memory does not grow.
    // BMI_SHM_EARLY_PEER_BYTES, BMI_SHM_EARLY_PEER_COUNT, BMI_SHM_EARLY_TOTAL_BYTES:
    // peer_bytes, peer_count, total_bytes, as tcp's and verbs' early limits.
    EarlyBudget::Limits early;
    // Shared buffers a peer offered that we map, per connection (bytes, regions). An offer
    // over budget is refused: its messages take the kernel's paths.
    std::size_t offer_bytes = 0;  // BMI_SHM_OFFER_BYTES, shm_offer_bytes
    std::size_t offer_count = 0;  // BMI_SHM_OFFER_COUNT, shm_offer_count
};

struct Options {
    std::uint32_t slot_count = 0;  // BMI_SHM_RING_SLOTS, option shm_ring_slots
    std::uint32_t slot_size = 0;   // BMI_SHM_SLOT_SIZE, option shm_slot_size
    bool single_copy = false;      // BMI_SHM_SINGLE_COPY=0 forces the two-copy path
    bool print_stats = false;      // BMI_SHM_STATS: Stats to stderr when finalized
    // Messages above the eager limit are either copied by both processes at once, each a
    // part of it, straight between the two buffers (split, shm_split.hpp), or streamed
    // through the ring (two copies, one by each process, pipelined). Which is faster depends
    // on the machine (shm_path_choice.hpp), so by default the receiver times both and takes
    // the faster per size. BMI_SHM_SPLIT_COPY (shm_split_copy): auto, 1 = always
    // split, 0 = the sender's CPU stays out of it: the receiver then reads alone from
    // single_copy_min bytes (BMI_SHM_SINGLE_COPY_MIN, shm_single_copy_min), and smaller large
    // messages are streamed.
    SplitMode split_copy = SplitMode::adaptive;
    bmi_size_t single_copy_min = 0;
    int spin_us = 0;           // BMI_SHM_SPIN_US; 0 = block at once
    int transfer_spin_us = 0;  // BMI_SHM_TRANSFER_SPIN_US, while a large message moves
    // BMI_memalloc hands out memory the peer maps too (shm_region.hpp); BMI_SHM_SHARED_BUFFERS=0
    // (shm_shared_buffers=0) leaves it to malloc, and every large message to the kernel's
    // cross-memory copies or the ring.
    bool shared_buffers = false;
    // Freed shared buffers kept for reuse (OwnRegions in shm_region.hpp): bytes over all
    // classes (BMI_SHM_POOL_BYTES, shm_pool_bytes) and regions per class
    // (BMI_SHM_POOL_PER_CLASS, shm_pool_per_class).
    PoolLimits pool;
    std::size_t pull_piece = 4u << 20;  // bytes read per process_vm_readv step
    Budgets budgets;
    // How long a connection's setup may take, from the first connect (backlog retries
    // included) or the accept until its handshake is done; then it is dropped and the peer's
    // operations fail with -BMI_ETIMEDOUT (BMI_SHM_SETUP_TIMEOUT_MS, shm_setup_timeout_ms;
    // shm_setup_deadline.cpp).
    std::chrono::milliseconds setup_timeout{};
    // Waits on a live peer (shm_peer_deadlines.cpp): a transfer it started and does not go on
    // with (BMI_SHM_STALL_TIMEOUT_MS), a full ring it frees nothing of (BMI_SHM_SEND_TIMEOUT_MS),
    // an RTS it never answers (BMI_SHM_RENDEZVOUS_TIMEOUT_MS).
    std::chrono::milliseconds stall_timeout{};
    std::chrono::milliseconds send_timeout{};
    std::chrono::milliseconds rendezvous_timeout{};
    // Accepted connections one process may hold before their handshake is done
    // (BMI_SHM_PENDING_PER_SOURCE, kit::Acceptor).
    std::size_t pending_per_source = 0;
    bmi_size_t eager_limit = 0;       // derived: min(16 KiB, half a ring)
    bmi_size_t unexpected_limit = 0;  // derived: Config's override or 16 KiB, <= half a ring
};

// Takes the shm rows of settings and derives the limits. 0, or -BMI_EINVAL (logged) for a
// ring geometry that is not a power of two.
int load_options(const support::Settings& settings, bmi_size_t unexpected_override, Options& out);

}  // namespace bmi::method::shm
