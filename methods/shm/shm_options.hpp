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
    // Smallest message sent by single copy (BMI_SHM_SINGLE_COPY_MIN, shm_single_copy_min);
    // smaller large messages take the pipelined two-copy path. Measured on the 2-vCPU VM of
    // doc/PERFORMANCE.md the two-copy pipeline (both processes copy, through a ring that stays
    // in cache) moves 1.4-2x the bytes per second of process_vm_readv up to 8 MiB and still
    // ~1.2x at 64 MiB; single copy leaves the sender's CPU free, which is what a server
    // streaming huge replies to many clients needs, so it takes over from 16 MiB.
    bmi_size_t single_copy_min = bmi_size_t{16} << 20;
    int spin_us = 20;                 // BMI_SHM_SPIN_US; 0 = block at once
    std::size_t pull_piece = 4u << 20;  // bytes read per process_vm_readv step
    bmi_size_t eager_limit = 0;       // derived: min(64 KiB, half a ring)
    bmi_size_t unexpected_limit = 0;  // derived: Config's override or 16 KiB, <= half a ring
};

// Reads environment and options ("shm_ring_slots=128,..."), derives the limits. 0 or
// -BMI_EINVAL for an impossible ring geometry.
int load_options(std::string_view option_string, bmi_size_t unexpected_override, Options& out);

}  // namespace bmi::method::shm
