// SPDX-License-Identifier: LGPL-2.1-or-later
// The SPSC slot ring; the memory-ordering argument is in the header.
#include "methods/shm/shm_ring.hpp"

#include <algorithm>

namespace bmi::method::shm {

void Window::write(std::size_t offset, const void* source, std::size_t length) const {
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

void Window::read(std::size_t offset, void* target, std::size_t length) const {
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
    : control_(control), slots_(slots), slot_count_(slot_count), slot_size_(slot_size) {}

Window Ring::window(std::uint64_t start, std::uint32_t count) const {
    Window w;
    auto position = static_cast<std::uint32_t>(start % slot_count_);
    std::uint32_t first = std::min(count, slot_count_ - position);
    w.first = slots_ + static_cast<std::size_t>(position) * slot_size_;
    w.first_size = static_cast<std::size_t>(first) * slot_size_;
    if (count > first) {
        w.second = slots_;
        w.second_size = static_cast<std::size_t>(count - first) * slot_size_;
    }
    return w;
}

// --- producer ---

std::uint32_t Ring::free_slots() {
    cached_other_ = control_->tail.load(std::memory_order_acquire);
    return slot_count_ - static_cast<std::uint32_t>(own_ - cached_other_);
}

bool Ring::has_room(std::uint32_t wanted) {
    if (slot_count_ - (own_ - cached_other_) >= wanted) return true;
    return free_slots() >= wanted;
}

Window Ring::claim(std::uint32_t count) const { return window(own_, count); }

void Ring::publish(std::uint32_t count) {
    own_ += count;
    control_->head.store(own_, std::memory_order_release);
}

bool Ring::block_producer(std::uint32_t wanted) {
    control_->producer_blocked.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    cached_other_ = control_->tail.load(std::memory_order_acquire);
    return slot_count_ - (own_ - cached_other_) >= wanted;
}

void Ring::unblock_producer() {
    if (control_->producer_blocked.load(std::memory_order_relaxed) != 0)
        control_->producer_blocked.store(0, std::memory_order_relaxed);
}

bool Ring::consumer_sleeping() const {
    // Pairs with the fence in sleep_consumer: our head store is ordered before this load.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return control_->consumer_sleeping.load(std::memory_order_relaxed) != 0;
}

// --- consumer ---

std::uint32_t Ring::used_slots() const {
    return static_cast<std::uint32_t>(control_->head.load(std::memory_order_acquire) - own_);
}

Window Ring::peek(std::uint32_t count) const { return window(own_, count); }

void Ring::release(std::uint32_t count) {
    own_ += count;
    control_->tail.store(own_, std::memory_order_release);
}

bool Ring::sleep_consumer() {
    control_->consumer_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return control_->head.load(std::memory_order_acquire) != own_;
}

void Ring::wake_consumer() {
    if (control_->consumer_sleeping.load(std::memory_order_relaxed) != 0)
        control_->consumer_sleeping.store(0, std::memory_order_relaxed);
}

bool Ring::producer_blocked() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return control_->producer_blocked.load(std::memory_order_relaxed) != 0;
}

}  // namespace bmi::method::shm
