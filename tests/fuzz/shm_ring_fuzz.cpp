// SPDX-License-Identifier: LGPL-2.1-or-later
// An shm ring whose segment the peer writes: the fuzzer's bytes become the slots (stamps,
// record headers, payloads), in up to four rounds, each followed by a pass of the consumer
// exactly as ShmMethod::receive_messages makes it (stamp, header, check_record, peek, read,
// release). The first byte picks the ring geometry.
// Properties: the consumer reads only inside the slots (ASan sees the slot array as one exact
// allocation); a record it accepts fits the window it peeks and is at most half the ring, as
// every producer's is. A pass may take more than slot_count slots: a producer may reuse a
// slot the pass released, so a slot seen twice in one pass is no fault (an earlier version
// of this target claimed otherwise and failed on a 1, 1, 1, 3-slot sequence in a 4-slot ring).
#include <array>
#include <memory>
#include <vector>

#include "methods/shm/shm_checks.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::shm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const std::uint8_t choice = in.byte();
    constexpr std::array<std::uint32_t, 3> counts{4, 8, 16};
    constexpr std::array<std::uint32_t, 2> sizes{256, 512};
    const std::uint32_t slot_count = counts[choice % counts.size()];
    const std::uint32_t slot_size = sizes[(choice >> 2) % sizes.size()];
    FUZZ_CHECK(valid_geometry(slot_count, slot_size));

    const std::size_t bytes = std::size_t{slot_count} * slot_size;
    auto control = std::make_unique<RingControl>();
    // Slot memory in 8-byte words: the stamps are read as aligned 64-bit atomics.
    std::vector<std::uint64_t> words(bytes / sizeof(std::uint64_t));
    auto* slots = reinterpret_cast<std::byte*>(words.data());
    Ring ring(control.get(), slots, slot_count, slot_size);

    std::vector<std::uint8_t> payload;
    for (int round = 0; round < 4 && !in.empty(); ++round) {
        // The peer writes some stretch of the segment: an offset, then bytes from there on.
        std::size_t offset = (std::size_t{in.byte()} << 4) % bytes;
        auto chunk = in.bytes(bytes - offset);
        std::memcpy(slots + offset, chunk.data(), chunk.size());

        // At most slot_count records a pass, as in the method, so a peer that keeps
        // publishing cannot keep its consumer busy for ever.
        for (std::uint32_t i = 0; i < ring.slot_count(); ++i) {
            if (!ring.has_message()) break;
            MsgHeader header;
            ring.peek(1).read(0, &header, sizeof header);
            const long long length = check_record(ring, header);
            if (length < 0) return 0;  // the method closes the connection here
            FUZZ_CHECK(header.slots <= ring.max_message_slots());
            const Window window = ring.peek(header.slots);
            FUZZ_CHECK(window.size() >= header_size + static_cast<std::size_t>(length));
            payload.resize(static_cast<std::size_t>(length));
            window.read(header_size, payload.data(), payload.size());
            ring.release(header.slots);
        }
        ring.producer_waiting();
    }
    return 0;
}
