// SPDX-License-Identifier: LGPL-2.1-or-later
// memfd creation, sealing and mapping for the shm segment; the layout is in the header.
#include "methods/shm/shm_segment.hpp"

#include <cerrno>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "bmi-types.h"
#include "methods/shm/shm_memfd.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/error/error_map.hpp"

namespace bmi::method::shm {

namespace {
constexpr std::uint32_t segment_magic = 0x4d485342u;
constexpr std::size_t counters_offset = 64;
constexpr std::size_t control_offset = 128;
constexpr std::size_t board_offset = 1024;
constexpr std::size_t board_size = split_board_entries * sizeof(SplitBoardEntry);
constexpr std::size_t slots_offset = 4096;
static_assert(counters_offset + 2 * sizeof(std::atomic<std::uint64_t>) <= control_offset);
static_assert(control_offset + 2 * sizeof(RingControl) <= board_offset);
static_assert(board_offset + 2 * board_size <= slots_offset);

struct SegmentHeader {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t slot_count;
    std::uint32_t slot_size;
};
}  // namespace

SharedSegment::~SharedSegment() {
    unmap();
    close_fd();
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
    if (this != &other) {
        unmap();
        close_fd();
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::exchange(other.fd_, -1);
        slot_count_ = other.slot_count_;
        slot_size_ = other.slot_size_;
    }
    return *this;
}

std::size_t SharedSegment::layout_size(std::uint32_t slot_count, std::uint32_t slot_size) {
    return slots_offset + 2 * static_cast<std::size_t>(slot_count) * slot_size;
}

int SharedSegment::create(std::uint32_t slot_count, std::uint32_t slot_size) {
    std::size_t size = layout_size(slot_count, slot_size);
    int fd = create_sealed_memfd("libbmi-shm", size);
    if (fd < 0) return fd;
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int rc = support::bmi_error_from_errno(errno);
        close(fd);
        return rc;
    }
    unmap();
    close_fd();
    base_ = static_cast<std::byte*>(base);
    size_ = size;
    fd_ = fd;
    slot_count_ = slot_count;
    slot_size_ = slot_size;
    new (base_) SegmentHeader{segment_magic, protocol_version, slot_count, slot_size};
    for (int i = 0; i < 2; ++i) {
        new (base_ + counters_offset + i * sizeof(std::atomic<std::uint64_t>))
            std::atomic<std::uint64_t>{0};
        new (base_ + control_offset + i * sizeof(RingControl)) RingControl{};
    }
    for (std::size_t i = 0; i < 2 * split_board_entries; ++i)
        new (base_ + board_offset + i * sizeof(SplitBoardEntry)) SplitBoardEntry{};
    return 0;
}

int SharedSegment::attach(int fd, std::uint32_t slot_count, std::uint32_t slot_size) {
    std::size_t size = layout_size(slot_count, slot_size);
    if (!sealed_memfd_of_size(fd, size)) {
        close(fd);
        return -BMI_EPROTO;
    }
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return support::bmi_error_from_errno(errno);
    unmap();
    base_ = static_cast<std::byte*>(base);
    size_ = size;
    slot_count_ = slot_count;
    slot_size_ = slot_size;
    auto* header = reinterpret_cast<const SegmentHeader*>(base_);
    if (header->magic != segment_magic || header->version != protocol_version ||
        header->slot_count != slot_count || header->slot_size != slot_size) {
        unmap();
        return -BMI_EPROTO;
    }
    return 0;
}

void SharedSegment::close_fd() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

void SharedSegment::unmap() {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = nullptr;
}

std::atomic<std::uint64_t>* SharedSegment::socket_messages(int index) const {
    return reinterpret_cast<std::atomic<std::uint64_t>*>(base_ + counters_offset +
                                                         static_cast<std::size_t>(index) *
                                                             sizeof(std::atomic<std::uint64_t>));
}

SplitBoardEntry* SharedSegment::board(int index) const {
    return reinterpret_cast<SplitBoardEntry*>(base_ + board_offset +
                                              static_cast<std::size_t>(index) * board_size);
}

Ring SharedSegment::ring(int index) const {
    auto* control = reinterpret_cast<RingControl*>(
        base_ + control_offset + static_cast<std::size_t>(index) * sizeof(RingControl));
    std::byte* slots = base_ + slots_offset +
                       static_cast<std::size_t>(index) * slot_count_ * slot_size_;
    return Ring(control, slots, slot_count_, slot_size_);
}

}  // namespace bmi::method::shm
