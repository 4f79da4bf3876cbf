// SPDX-License-Identifier: LGPL-2.1-or-later
// Opaque 64-bit ids for objects, with O(1) lookup that rejects stale, freed and foreign ids.
//
// An id packs a slot index (low 32 bits) with the slot's generation (high 31 bits, never 0).
// Freeing a slot bumps its generation, so an id kept after release no longer matches (until the
// 31-bit generation of that one slot wraps, after 2^31 reuses), and a made-up number almost
// never does. OrangeFS hands out raw pointers as ids, where a stale id is a
// crash; here it is a nullptr from find(). Not thread safe: the owner holds its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bmi::support {

class IdGenerator {
public:
    using Id = std::int64_t;

    // Each generator starts its generations at a different point, so an id from one instance
    // is (almost always) foreign to another instance in the same process.
    IdGenerator();

    // Registers object (not nullptr: refused with 0) and returns its id (> 0). Amortised O(1);
    // may allocate the slot table. Inline, with erase and find: every posted receive takes all
    // three.
    Id insert(void* object) {
        if (object == nullptr) return 0;
        const std::uint32_t index = free_head_ != 0 ? free_head_ - 1 : grow();
        Slot& slot = slots_[index];
        free_head_ = slot.next_free;
        slot.object = object;
        slot.next_free = 0;
        ++live_;
        return static_cast<Id>((static_cast<std::uint64_t>(slot.generation) << 32) | index);
    }
    // The object registered under id, or nullptr if id is unknown, stale or malformed.
    void* find(Id id) const {
        const Slot* slot = slot_of(id);
        return slot ? slot->object : nullptr;
    }
    // Forgets id; returns false (and changes nothing) if id was not live.
    bool erase(Id id) {
        Slot* slot = const_cast<Slot*>(slot_of(id));
        if (slot == nullptr) return false;
        slot->object = nullptr;
        // Generation 0 is never handed out, so a zeroed id can never match.
        slot->generation = (slot->generation + 1) & generation_mask;
        if (slot->generation == 0) slot->generation = 1;
        slot->next_free = free_head_;
        free_head_ = static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) & 0xffffffffu) + 1;
        --live_;
        return true;
    }
    std::size_t size() const { return live_; }

private:
    struct Slot {
        void* object = nullptr;
        std::uint32_t generation = 1;  // of the id the slot hands out next / has out now
        std::uint32_t next_free = 0;   // index + 1 of the next free slot, 0 = end of the list
    };
    static constexpr std::uint32_t generation_mask = 0x7fffffffu;  // keeps ids positive

    // Appends a free slot to the table (none is free): its index, with next_free 0.
    std::uint32_t grow();
    const Slot* slot_of(Id id) const {
        if (id <= 0) return nullptr;
        auto raw = static_cast<std::uint64_t>(id);
        auto index = static_cast<std::uint32_t>(raw & 0xffffffffu);
        auto generation = static_cast<std::uint32_t>(raw >> 32);
        if (index >= slots_.size()) return nullptr;
        const Slot& slot = slots_[index];
        if (slot.object == nullptr || slot.generation != generation) return nullptr;
        return &slot;
    }

    std::vector<Slot> slots_;
    std::uint32_t free_head_ = 0;  // index + 1, 0 = empty
    std::size_t live_ = 0;
    std::uint32_t first_generation_;
};

}  // namespace bmi::support
