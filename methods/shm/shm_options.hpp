// SPDX-License-Identifier: LGPL-2.1-or-later
// Tunables of the shm method, from the environment and the BMI_initialize option string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bmi-types.h"

namespace bmi::method::shm {

struct Options {
    std::uint32_t slot_count = 64;    // BMI_SHM_RING_SLOTS, option shm_ring_slots
    std::uint32_t slot_size = 8192;   // BMI_SHM_SLOT_SIZE, option shm_slot_size
    bool single_copy = true;          // BMI_SHM_SINGLE_COPY=0 forces the two-copy path
    // Messages above the eager limit are copied by both processes at once, each a part of it,
    // straight between the two buffers (shm_split.hpp): on the 2-vCPU VMs of
    // doc/PERFORMANCE.md that moves about twice what one process_vm_readv does and 1.5-2x
    // the two-copy pipeline. BMI_SHM_SPLIT_COPY=0 (shm_split_copy) keeps the sender's CPU
    // out of it; the receiver then reads alone from single_copy_min bytes
    // (BMI_SHM_SINGLE_COPY_MIN, shm_single_copy_min), and smaller large messages take the
    // pipelined two-copy path, which beats a lone process_vm_readv up to about that size.
    bool split_copy = true;
    bmi_size_t single_copy_min = bmi_size_t{16} << 20;
    int spin_us = 20;                 // BMI_SHM_SPIN_US; 0 = block at once
    std::size_t pull_piece = 4u << 20;  // bytes read per process_vm_readv step
    bmi_size_t eager_limit = 0;       // derived: min(16 KiB, half a ring)
    bmi_size_t unexpected_limit = 0;  // derived: Config's override or 16 KiB, <= half a ring
};

// Reads environment and options ("shm_ring_slots=128,..."), derives the limits. 0 or
// -BMI_EINVAL for an impossible ring geometry.
int load_options(std::string_view option_string, bmi_size_t unexpected_override, Options& out);

}  // namespace bmi::method::shm
