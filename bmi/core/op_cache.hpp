// SPDX-License-Identifier: LGPL-2.1-or-later
// Recycled Operation objects. Posting and reaping are the library's hottest calls, and an
// operation lives only from its post to its test; a small per-thread stock of them costs no
// lock and no trip through malloc, which a ping-pong pays four times per round trip otherwise.
#pragma once

#include <memory>

#include "methods/method.hpp"

namespace bmi::core {

class OpCache {
public:
    // A new operation, every member at its initialiser.
    static method::Operation* take();
    // Destroys op (it must be linked nowhere) and keeps its memory for the next take().
    static void give(method::Operation* op);

    struct Give {
        void operator()(method::Operation* op) const { give(op); }
    };
};

using OpPtr = std::unique_ptr<method::Operation, OpCache::Give>;

}  // namespace bmi::core
