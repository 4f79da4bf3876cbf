// SPDX-License-Identifier: LGPL-2.1-or-later
// The SPSC slot ring; the memory-ordering argument is in the header.
#include "methods/shm/shm_ring.hpp"

#include <algorithm>
#include <bit>

namespace bmi::method::shm {

void Window::write_split(std::size_t offset, const void* source, std::size_t length) const {
    if (length == 0) return;  // source may be null for an empty message
    const auto* from = static_cast<const std::byte*>(source);
    if (offset < first_size) {
        std::size_t n = std::min(length, first_size - offset);
        std::memcpy(first + offset, from, n);
        from += n;
        length -= n;
        offset = first_size;
    }
    if (length > 0) std::memcpy(second + (offset - first_size), from, length);
}

void Window::read_split(std::size_t offset, void* target, std::size_t length) const {
    if (length == 0) return;  // target may be null for an empty receive
    auto* to = static_cast<std::byte*>(target);
    if (offset < first_size) {
        std::size_t n = std::min(length, first_size - offset);
        std::memcpy(to, first + offset, n);
        to += n;
        length -= n;
        offset = first_size;
    }
    if (length > 0) std::memcpy(to, second + (offset - first_size), length);
}

Ring::Ring(RingControl* control, std::byte* slots, std::uint32_t slot_count,
           std::uint32_t slot_size)
    : control_(control),
      slots_(slots),
      slot_count_(slot_count),
      slot_size_(slot_size),
      slot_shift_(static_cast<std::uint32_t>(std::countr_zero(slot_size))) {}

// --- producer ---

std::uint32_t Ring::free_slots() {
    cached_other_ = control_->tail.load(std::memory_order_acquire);
    return slot_count_ - static_cast<std::uint32_t>(own_ - cached_other_);
}

bool Ring::block_producer(std::uint32_t wanted) {
    control_->producer_blocked.store(1, std::memory_order_relaxed);
    full_fence();
    cached_other_ = control_->tail.load(std::memory_order_acquire);
    return slot_count_ - (own_ - cached_other_) >= wanted;
}

void Ring::unblock_producer() {
    if (control_->producer_blocked.load(std::memory_order_relaxed) != 0)
        control_->producer_blocked.store(0, std::memory_order_relaxed);
}

// --- consumer ---

void Ring::release(std::uint32_t count) {
    if (stamp_at(own_).load(std::memory_order_relaxed) & 1) released_tight_ = true;
    // A later message may start where this one's later slots are: clear what could look
    // like a stamp there before the producer may reuse them.
    for (std::uint32_t i = 1; i < count; ++i)
        stamp_at(own_ + i).store(0, std::memory_order_relaxed);
    own_ += count;
    control_->tail.store(own_, std::memory_order_release);
}

bool Ring::producer_waiting() {
    if (!released_tight_) return false;
    released_tight_ = false;
    full_fence();
    return control_->producer_blocked.load(std::memory_order_relaxed) != 0;
}

}  // namespace bmi::method::shm
