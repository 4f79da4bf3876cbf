// SPDX-License-Identifier: LGPL-2.1-or-later
// Segment-list copies and the process_vm_readv path.
#include "methods/shm/shm_copy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/uio.h>

namespace bmi::method::shm {

void gather_list(std::span<const Segment> segments, std::uint64_t from, const Window& window,
                 std::size_t window_offset, std::size_t length) {
    for_each_piece(segments, segment_base, segment_size, from, length,
                   [&](const std::byte* p, std::size_t n) {
                       window.write(window_offset, p, n);
                       window_offset += n;
                   });
}

void scatter_list(const Window& window, std::size_t window_offset,
                  std::span<const Segment> segments, std::uint64_t to, std::size_t length) {
    for_each_piece(segments, segment_base, segment_size, to, length,
                   [&](std::byte* p, std::size_t n) {
                       window.read(window_offset, p, n);
                       window_offset += n;
                   });
}

int nonempty_segments(std::span<const Segment> segments) {
    int count = 0;
    for (const auto& s : segments)
        if (s.size > 0) ++count;
    return count;
}

int describe_segments(std::span<const Segment> segments, std::span<RemoteIov> out) {
    std::size_t count = 0;
    for (const auto& s : segments) {
        if (s.size <= 0) continue;
        if (count == out.size()) return -1;
        out[count++] = {reinterpret_cast<std::uintptr_t>(s.data),
                        static_cast<std::uint64_t>(s.size)};
    }
    return static_cast<int>(count);
}

long copy_remote(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
                 std::span<const Segment> local, std::uint64_t offset, std::size_t length) {
    // The kernel takes at most IOV_MAX entries per side; a shorter read is fine, the caller
    // simply comes back for the rest.
    constexpr std::size_t max_iov = 1024;
    iovec local_iov[64];
    iovec remote_iov[64];
    static_assert(64 <= max_iov);
    std::size_t local_count = 0, local_bytes = 0;
    for_each_piece(local, segment_base, segment_size, offset, length,
                   [&](std::byte* p, std::size_t n) {
                       if (local_count == std::size(local_iov)) return;
                       local_iov[local_count++] = {p, n};
                       local_bytes += n;
                   });
    std::size_t remote_count = 0, remote_bytes = 0;
    auto remote_base = [](const RemoteIov& r) { return r.address; };
    auto remote_size = [](const RemoteIov& r) { return r.length; };
    for_each_piece(remote, remote_base, remote_size, offset, local_bytes,
                   [&](std::uint64_t address, std::size_t n) {
                       if (remote_count == std::size(remote_iov)) return;
                       remote_iov[remote_count++] = {reinterpret_cast<void*>(address), n};
                       remote_bytes += n;
                   });
    if (remote_bytes == 0) return -EFAULT;
    // Trim the local side to what the remote side covers (either may have been capped).
    std::size_t want = std::min(local_bytes, remote_bytes);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < local_count; ++i) {
        if (kept + local_iov[i].iov_len >= want) {
            local_iov[i].iov_len = want - kept;
            local_count = i + 1;
            break;
        }
        kept += local_iov[i].iov_len;
    }
    ssize_t n = direction == Direction::read
                    ? process_vm_readv(pid, local_iov, local_count, remote_iov, remote_count, 0)
                    : process_vm_writev(pid, local_iov, local_count, remote_iov, remote_count, 0);
    if (n < 0) return -errno;
    if (n == 0) return -EFAULT;
    return static_cast<long>(n);
}

int copy_remote_exactly(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
                        std::span<const Segment> local, std::uint64_t offset, std::size_t length) {
    while (length > 0) {
        long n = copy_remote(direction, pid, remote, local, offset, length);
        if (n < 0) return static_cast<int>(n);
        offset += static_cast<std::uint64_t>(n);
        length -= static_cast<std::size_t>(n);
    }
    return 0;
}

void copy_between(std::span<const Segment> to, std::span<const Segment> from, std::uint64_t offset,
                  std::size_t length) {
    for_each_piece(from, segment_base, segment_size, offset, length,
                   [&](const std::byte* source, std::size_t n) {
                       for_each_piece(to, segment_base, segment_size, offset, n,
                                      [&](std::byte* target, std::size_t m) {
                                          std::memcpy(target, source, m);
                                          source += m;
                                      });
                       offset += n;
                   });
}

int copy_chunk(Direction direction, pid_t pid, std::span<const RemoteIov> remote,
               std::span<const Segment> mapped, std::span<const Segment> local,
               std::uint64_t offset, std::size_t length) {
    if (mapped.empty()) return copy_remote_exactly(direction, pid, remote, local, offset, length);
    if (direction == Direction::read)
        copy_between(local, mapped, offset, length);
    else
        copy_between(mapped, local, offset, length);
    return 0;
}

}  // namespace bmi::method::shm
