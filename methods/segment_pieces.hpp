// SPDX-License-Identifier: LGPL-2.1-or-later
// Walking a byte range of a list (an operation's segments, a peer's iovecs) piece by piece:
// every method that moves lists natively cuts them the same way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "methods/operation.hpp"

namespace bmi::method {

// Calls fn(pointer, length) for each contiguous piece of [offset, offset + length) of a list,
// through the accessors base(item) and size(item); empty items give no piece.
template <class List, class Base, class Size, class Fn>
void for_each_piece(const List& list, Base base, Size size, std::uint64_t offset,
                    std::size_t length, Fn&& fn) {
    for (const auto& item : list) {
        if (length == 0) return;
        auto item_size = static_cast<std::uint64_t>(size(item));
        if (offset >= item_size) {
            offset -= item_size;
            continue;
        }
        auto n = static_cast<std::size_t>(std::min<std::uint64_t>(item_size - offset, length));
        fn(base(item) + offset, n);
        length -= n;
        offset = 0;
    }
}

inline constexpr auto segment_base = [](const Segment& s) {
    return static_cast<std::byte*>(s.data);
};
inline constexpr auto segment_size = [](const Segment& s) { return s.size; };

// The segment list an operation moves (one segment for a contiguous buffer).
inline std::span<const Segment> segments_of(const Operation& op) {
    return {op.segments, static_cast<std::size_t>(op.segment_count)};
}

// fn(pointer, length) for each piece of [offset, offset + length) of an operation's segments.
template <class Fn>
void for_each_piece(std::span<const Segment> segments, std::uint64_t offset, std::size_t length,
                    Fn&& fn) {
    for_each_piece(segments, segment_base, segment_size, offset, length, fn);
}

// The memory of [offset, offset + length) where one segment holds all of it, else null.
inline std::byte* within_one_segment(std::span<const Segment> segments, std::uint64_t offset,
                                     std::size_t length) {
    std::byte* found = nullptr;
    for_each_piece(segments, offset, length, [&](std::byte* piece, std::size_t n) {
        if (found == nullptr && n == length) found = piece;
    });
    return found;
}

// Copies [offset, offset + out.size()) of the list into out.
inline void gather_pieces(std::span<const Segment> segments, std::uint64_t offset,
                          std::span<std::byte> out) {
    std::byte* to = out.data();
    for_each_piece(segments, offset, out.size(), [&](const std::byte* piece, std::size_t n) {
        std::memcpy(to, piece, n);
        to += n;
    });
}

// Copies `from` into the list at `offset`.
inline void scatter_pieces(std::span<const std::byte> from, std::span<const Segment> segments,
                           std::uint64_t offset) {
    const std::byte* next = from.data();
    for_each_piece(segments, offset, from.size(), [&](std::byte* piece, std::size_t n) {
        std::memcpy(piece, next, n);
        next += n;
    });
}

}  // namespace bmi::method
