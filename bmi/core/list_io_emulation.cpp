// SPDX-License-Identifier: LGPL-2.1-or-later
// Packing and unpacking for emulated list I/O; see the header.
#include "bmi/core/list_io_emulation.hpp"

#include <cstdlib>
#include <cstring>

namespace bmi::core {

bmi_size_t list_total(const void* const* buffers, const bmi_size_t* sizes, int count) {
    if (count < 1 || buffers == nullptr || sizes == nullptr) return -1;
    bmi_size_t total = 0;
    for (int i = 0; i < count; ++i) {
        if (sizes[i] < 0 || (sizes[i] > 0 && buffers[i] == nullptr)) return -1;
        // A sum that wraps could equal the total the caller gave and pass as valid.
        if (__builtin_add_overflow(total, sizes[i], &total)) return -1;
    }
    return total;
}

void* pack_list(const void* const* buffers, const bmi_size_t* sizes, int count, bmi_size_t total) {
    auto* packed = static_cast<char*>(std::malloc(total > 0 ? static_cast<std::size_t>(total) : 1));
    if (packed == nullptr) return nullptr;
    bmi_size_t offset = 0;
    for (int i = 0; i < count && offset < total; ++i) {
        bmi_size_t n = sizes[i] < total - offset ? sizes[i] : total - offset;
        if (n > 0) std::memcpy(packed + offset, buffers[i], static_cast<std::size_t>(n));
        offset += n;
    }
    return packed;
}

void unpack_list(const void* packed, bmi_size_t bytes, const void* const* buffers,
                 const bmi_size_t* sizes, int count) {
    const auto* from = static_cast<const char*>(packed);
    bmi_size_t offset = 0;
    for (int i = 0; i < count && offset < bytes; ++i) {
        bmi_size_t n = sizes[i] < bytes - offset ? sizes[i] : bytes - offset;
        // The list is the receiver's own writable memory; the API types it const void*const*.
        if (n > 0)
            std::memcpy(const_cast<void*>(buffers[i]), from + offset, static_cast<std::size_t>(n));
        offset += n;
    }
}

}  // namespace bmi::core
