// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method's entry in the static method table: processes on one node over shared rings.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "methods/method.hpp"
#include "methods/shm/shm_path_choice.hpp"

namespace bmi::method::shm {

// Creates an shm instance; with a listen address "shm://name" it binds that name (0, or
// -BMI_EADDRINUSE if a live instance holds it, -BMI_EINVAL if malformed).
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

// How a large receive's bytes came over: copied by both processes from the sender's shared
// buffer (BMI_memalloc) mapped here, split between both processes by cross-memory copies,
// read by the receiver alone (process_vm_readv), streamed through the ring (two copies), or
// copied by the receiver alone from the sender's shared buffer (split copy off, or the sender
// on the receiver's CPU).
enum class TakenPath : std::uint8_t {
    shared = 0,
    split = 1,
    single = 2,
    stream = 3,
    shared_single = 4
};
inline constexpr std::size_t taken_paths = 5;
const char* taken_path_name(TakenPath path);
// Completed large receives, [size class (size_classes, PathChoice::class_of)][TakenPath].
using LargeReceiveCounts = std::array<std::array<std::uint64_t, taken_paths>, size_classes>;

// BMI_get_info(addr or 0, get_stats_option, Stats*): how the instance's waits went, and the
// paths its large receives took. BMI_SHM_STATS=1 also prints them when it is finalized.
inline constexpr int get_stats_option = 0x7301;
struct Stats {
    std::uint64_t futile_spins = 0;  // waits that slept at once: the peer waits on our CPU
    LargeReceiveCounts large_receives{};
};

// shm_listener.cpp's listen_on: Descriptor::reserve_same_node.
int reserve_same_node(std::string_view name, int& fd);
inline constexpr Descriptor descriptor{
    .name = "bmi_shm", .scheme = "shm", .create = &create, .reserve_same_node = &reserve_same_node};

}  // namespace bmi::method::shm
