// SPDX-License-Identifier: LGPL-2.1-or-later
// An operation over two buffers of its own, for the tests of a connection's halves that need
// no socket and no method (tcp's frame reader and writer).
#pragma once

#include <cstdint>
#include <vector>

#include "methods/operation.hpp"

namespace bmi::test {

struct TwoBufferOp {
    std::vector<std::uint8_t> a;
    std::vector<std::uint8_t> b;
    method::Segment segs[2];
    method::Operation op;
    TwoBufferOp(method::OpKind kind, std::size_t a_size, std::size_t b_size)
        : a(a_size), b(b_size) {
        segs[0] = {a.data(), static_cast<bmi_size_t>(a_size)};
        segs[1] = {b.data(), static_cast<bmi_size_t>(b_size)};
        op.kind = kind;
        op.segments = segs;
        op.segment_count = 2;
        op.total_size = static_cast<bmi_size_t>(a_size + b_size);
    }
};

}  // namespace bmi::test
