// SPDX-License-Identifier: LGPL-2.1-or-later
// Gives freed heap memory back to the kernel. A server that buffered what hostile or departed
// peers sent frees it when they go, but the allocator keeps the pages (doc/RELIABILITY.md, "A
// whole server", has pvfs_server's figures).
#pragma once

#include <cstdint>

namespace bmi::support {

// Counts bytes a method has freed and returns the allocator's free pages to the kernel once
// `threshold` bytes have been freed since the last time (malloc_trim with glibc; nothing
// elsewhere). Cheap to call often: the trim itself runs at most once per threshold.
class MemoryReturner {
public:
    explicit MemoryReturner(std::int64_t threshold = 1 << 20) : threshold_(threshold) {}
    void freed(std::int64_t bytes) { pending_ += bytes; }
    // Call where the freed memory is really gone (after the objects are destroyed).
    void maybe_return();

private:
    std::int64_t threshold_;
    std::int64_t pending_ = 0;
};

}  // namespace bmi::support
