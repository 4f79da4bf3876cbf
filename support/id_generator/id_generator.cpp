// SPDX-License-Identifier: LGPL-2.1-or-later
// Slot table behind IdGenerator; see the header for the id layout.
#include "id_generator.hpp"

#include <atomic>

namespace bmi::support {

IdGenerator::IdGenerator() {
    static std::atomic<std::uint32_t> instances{0};
    // Spread successive generators far apart in generation space (golden-ratio step).
    std::uint32_t n = instances.fetch_add(1, std::memory_order_relaxed);
    first_generation_ = ((n * 0x9E3779B1u) & generation_mask) | 1u;
}

std::uint32_t IdGenerator::grow() {
    const auto index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
    slots_.back().generation = first_generation_;
    return index;
}

}  // namespace bmi::support
