// SPDX-License-Identifier: LGPL-2.1-or-later
// The copy engine: moving bytes between an operation's segment list and ring windows, and the
// single-copy read of a peer's memory with process_vm_readv.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "methods/method.hpp"
#include "methods/segment_pieces.hpp"
#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

// Copies `length` bytes starting at logical offset `from` of the segment list into the window
// at `window_offset`.
void gather_list(std::span<const Segment> segments, std::uint64_t from, const Window& window,
                 std::size_t window_offset, std::size_t length);
inline void gather(std::span<const Segment> segments, std::uint64_t from, const Window& window,
                   std::size_t window_offset, std::size_t length) {
    if (segments.size() == 1)  // contiguous buffers, the common case, need no list walk
        window.write(window_offset, static_cast<const std::byte*>(segments[0].data) + from, length);
    else
        gather_list(segments, from, window, window_offset, length);
}
// Copies `length` bytes from the window at `window_offset` into the segment list at `to`.
void scatter_list(const Window& window, std::size_t window_offset,
                  std::span<const Segment> segments, std::uint64_t to, std::size_t length);
inline void scatter(const Window& window, std::size_t window_offset,
                    std::span<const Segment> segments, std::uint64_t to, std::size_t length) {
    if (segments.size() == 1)
        window.read(window_offset, static_cast<std::byte*>(segments[0].data) + to, length);
    else
        scatter_list(window, window_offset, segments, to, length);
}

// The RTS payload describing segments, skipping empty ones. Returns the count written (at most
// out.size()), or -1 if the list does not fit.
int describe_segments(std::span<const Segment> segments, std::span<RemoteIov> out);
int nonempty_segments(std::span<const Segment> segments);

// Cross-memory attach between a local segment list and another process's iovec list, at the
// same logical offset in both: read copies remote -> local (process_vm_readv), write copies
// local -> remote (process_vm_writev). Moves up to `length` bytes; returns how many (> 0) or
// -errno. The kernel takes a bounded number of iovecs per call, so a long list moves short.
enum class Direction : std::uint8_t { read, write };
long copy_remote(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
                 std::span<const Segment> local, std::uint64_t offset, std::size_t length);
inline long read_remote(pid_t pid, std::span<const RemoteIov> remote,
                        std::span<const Segment> local, std::uint64_t offset, std::size_t length) {
    return copy_remote(Direction::read, pid, remote, local, offset, length);
}
// All of [offset, offset + length), however many calls that takes; 0 or -errno.
int copy_remote_exactly(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
                        std::span<const Segment> local, std::uint64_t offset, std::size_t length);

// Copies length bytes from the segment list from to the segment list to, at the same
// logical offset in both: one message in two lists of pieces that need not line up.
void copy_between(std::span<const Segment> to, std::span<const Segment> from, std::uint64_t offset,
                  std::size_t length);

// One chunk of a split copy (shm_split.hpp) in direction: through mapped, the peer's buffer
// as mapped here (shm_region.hpp), with memcpy; if that is empty, through the kernel to or
// from remote. 0 or -errno.
int copy_chunk(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
               std::span<const Segment> mapped, std::span<const Segment> local,
               std::uint64_t offset, std::size_t length);

}  // namespace bmi::method::shm
