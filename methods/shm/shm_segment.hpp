// SPDX-License-Identifier: LGPL-2.1-or-later
// The shared segment of one connection: an anonymous memfd holding two rings.
//
// Layout (offsets in bytes): [0, 64) SegmentHeader; [64, 80) socket message counters of
// the initiator and the acceptor (shm_region.hpp); [128, 256) control of ring 0;
// [256, 384) control of ring 1; [1024, 2048) split board 0, [2048, 3072) split board 1;
// from 4096 the slots of ring 0, then those of ring 1.
// Ring 0 carries initiator -> acceptor, ring 1 acceptor -> initiator. The memfd is sealed
// against resizing before it is passed, so the acceptor can never be hit by SIGBUS from a
// peer shrinking it; only the two processes holding the descriptor can map it, and the kernel
// frees it when both mappings and descriptors are gone (also after SIGKILL).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_split.hpp"

namespace bmi::method::shm {

class SharedSegment {
public:
    SharedSegment() = default;
    ~SharedSegment();
    SharedSegment(SharedSegment&& other) noexcept;
    SharedSegment& operator=(SharedSegment&& other) noexcept;
    SharedSegment(const SharedSegment&) = delete;
    SharedSegment& operator=(const SharedSegment&) = delete;

    static std::size_t layout_size(std::uint32_t slot_count, std::uint32_t slot_size);

    // New zeroed, sealed segment; 0 or -BMI_E*. fd() stays open until close_fd().
    int create(std::uint32_t slot_count, std::uint32_t slot_size);
    // Maps a segment received from a peer after checking its seals, size and header.
    // Takes ownership of fd (closed once mapped); 0 or -BMI_E*.
    int attach(int fd, std::uint32_t slot_count, std::uint32_t slot_size);

    int fd() const { return fd_; }
    void close_fd();
    bool mapped() const { return base_ != nullptr; }
    // Ring `index` (0 or 1) as seen by this process.
    Ring ring(int index) const;
    // Split board `index` (shm_split.hpp): board 0 belongs to the initiator, 1 to the
    // acceptor; each side hands out the chunks of the messages it receives on its own.
    SplitBoardEntry* board(int index) const;
    // How many offers and withdrawals side `index` (0 the initiator, 1 the acceptor) has put
    // on the socket, so the other side reads the socket only when there is something to read.
    std::atomic<std::uint64_t>* socket_messages(int index) const;

private:
    void unmap();

    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;
    std::uint32_t slot_count_ = 0;
    std::uint32_t slot_size_ = 0;
};

}  // namespace bmi::method::shm
