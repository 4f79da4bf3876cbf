// SPDX-License-Identifier: LGPL-2.1-or-later
// Slot table behind IdGenerator; see the header for the id layout.
#include "id_generator.hpp"

#include <atomic>

namespace bmi::support {

namespace {
constexpr std::uint32_t generation_mask = 0x7fffffffu;  // keeps ids positive

IdGenerator::Id make_id(std::uint32_t index, std::uint32_t generation) {
    return static_cast<IdGenerator::Id>((static_cast<std::uint64_t>(generation) << 32) | index);
}
}  // namespace

IdGenerator::IdGenerator() {
    static std::atomic<std::uint32_t> instances{0};
    // Spread successive generators far apart in generation space (golden-ratio step).
    std::uint32_t n = instances.fetch_add(1, std::memory_order_relaxed);
    first_generation_ = ((n * 0x9E3779B1u) & generation_mask) | 1u;
}

IdGenerator::Id IdGenerator::insert(void* object) {
    if (object == nullptr) return 0;
    std::uint32_t index;
    if (free_head_ != 0) {
        index = free_head_ - 1;
        free_head_ = slots_[index].next_free;
    } else {
        index = static_cast<std::uint32_t>(slots_.size());
        slots_.emplace_back();
        slots_.back().generation = first_generation_;
    }
    Slot& slot = slots_[index];
    slot.object = object;
    slot.next_free = 0;
    ++live_;
    return make_id(index, slot.generation);
}

bool IdGenerator::erase(Id id) {
    if (slot_of(id) == nullptr) return false;
    auto index = static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) & 0xffffffffu);
    Slot& slot = slots_[index];
    slot.object = nullptr;
    // Generation 0 is never handed out, so a zeroed id can never match.
    slot.generation = (slot.generation + 1) & generation_mask;
    if (slot.generation == 0) slot.generation = 1;
    slot.next_free = free_head_;
    free_head_ = index + 1;
    --live_;
    return true;
}

}  // namespace bmi::support
