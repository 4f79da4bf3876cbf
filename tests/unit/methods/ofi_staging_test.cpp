// SPDX-License-Identifier: LGPL-2.1-or-later
// The spare staging buffers of the ofi method's encrypted large messages
// (methods/ofi/ofi_staging.hpp): reused when large enough, and kept within their bounds.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>

#include "methods/ofi/ofi_staging.hpp"

using bmi::method::ofi::StagingBuffer;
using bmi::method::ofi::StagingBuffers;

TEST_CASE("a spare large enough is taken again, the smallest that fits", "[ofi][staging]") {
    StagingBuffers buffers;
    StagingBuffer small = buffers.take(1000);
    StagingBuffer large = buffers.take(100000);
    REQUIRE(small.size() == 1000);
    const std::uint8_t* small_at = small.data();
    const std::uint8_t* large_at = large.data();
    buffers.give_back(std::move(large));
    buffers.give_back(std::move(small));
    CHECK(buffers.kept_bytes() == 101000);

    StagingBuffer next = buffers.take(900);
    CHECK(next.data() == small_at);
    CHECK(next.size() == 900);
    CHECK(next.capacity() == 1000);
    StagingBuffer bigger = buffers.take(50000);
    CHECK(bigger.data() == large_at);
    CHECK(buffers.kept_bytes() == 0);
    // None fits: a new one.
    buffers.give_back(std::move(next));
    StagingBuffer fresh = buffers.take(2000);
    CHECK(fresh.capacity() == 2000);
    CHECK(buffers.kept_bytes() == 1000);
}

TEST_CASE("spares stay within their count and bytes, the larger kept", "[ofi][staging]") {
    StagingBuffers buffers;
    for (std::size_t i = 1; i <= StagingBuffers::kept_most + 2; ++i)
        buffers.give_back(StagingBuffer(i * 1000));
    // The two smallest went to make room.
    std::size_t kept = 0;
    for (std::size_t i = 3; i <= StagingBuffers::kept_most + 2; ++i) kept += i * 1000;
    CHECK(buffers.kept_bytes() == kept);

    // One above the byte bound is never kept; one that fits lets smaller ones go.
    buffers.give_back(StagingBuffer(StagingBuffers::kept_bytes_most + 1));
    CHECK(buffers.kept_bytes() == kept);
    buffers.give_back(StagingBuffer(StagingBuffers::kept_bytes_most));
    CHECK(buffers.kept_bytes() == StagingBuffers::kept_bytes_most);
    // A smaller one does not push out a larger.
    buffers.give_back(StagingBuffer(10));
    CHECK(buffers.kept_bytes() == StagingBuffers::kept_bytes_most);
}
