// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_staging.hpp"

#include <algorithm>

namespace bmi::method::ofi {

StagingBuffer StagingBuffers::take(std::size_t size) {
    // The smallest spare that holds it.
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it)
        if (it->capacity() >= size && (best == spare_.end() || it->capacity() < best->capacity()))
            best = it;
    StagingBuffer buffer;
    if (best != spare_.end()) {
        kept_bytes_ -= best->capacity();
        buffer = std::move(*best);
        spare_.erase(best);
    } else {
        buffer = StagingBuffer(size);
    }
    buffer.set_size(size);
    return buffer;
}

void StagingBuffers::give_back(StagingBuffer buffer) {
    if (buffer.capacity() == 0 || buffer.capacity() > kept_bytes_most) return;
    // Room by letting go of the smallest spares: the next message is likelier as large.
    while (!spare_.empty() &&
           (spare_.size() >= kept_most || kept_bytes_ + buffer.capacity() > kept_bytes_most)) {
        const auto smallest = std::min_element(
            spare_.begin(), spare_.end(),
            [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
        if (smallest->capacity() >= buffer.capacity()) return;
        kept_bytes_ -= smallest->capacity();
        spare_.erase(smallest);
    }
    kept_bytes_ += buffer.capacity();
    spare_.push_back(std::move(buffer));
}

}  // namespace bmi::method::ofi
