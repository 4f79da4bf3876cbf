// SPDX-License-Identifier: LGPL-2.1-or-later
// Where an encrypted peer's large messages are held sealed (ofi_records.cpp), and the buffers
// kept for the next ones: a fresh buffer of a megabyte costs its page faults on every message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "support/keys/sealed_bulk.hpp"

namespace bmi::method::ofi {

class StagingBuffer {
public:
    StagingBuffer() = default;
    explicit StagingBuffer(std::size_t capacity)
        : bytes_(new std::uint8_t[capacity]), capacity_(capacity) {}
    std::uint8_t* data() { return bytes_.get(); }
    const std::uint8_t* data() const { return bytes_.get(); }
    std::size_t size() const { return size_; }
    std::size_t capacity() const { return capacity_; }
    // No bytes are written: the seal or the provider fills them.
    void set_size(std::size_t size) { size_ = size; }

private:
    std::unique_ptr<std::uint8_t[]> bytes_;
    std::size_t capacity_ = 0;
    std::size_t size_ = 0;
};

// Spare buffers, at most kept_most of them and kept_bytes_most bytes together
// (doc/methods/ofi.md, "Encryption").
class StagingBuffers {
public:
    static constexpr std::size_t kept_most = 4;
    static constexpr std::size_t kept_bytes_most = std::size_t{32} << 20;
    // A buffer of `size` bytes, their contents undefined.
    StagingBuffer take(std::size_t size);
    void give_back(StagingBuffer buffer);
    std::size_t kept_bytes() const { return kept_bytes_; }

private:
    std::vector<StagingBuffer> spare_;
    std::size_t kept_bytes_ = 0;
};

// One large message of an encrypted peer, by op: its sealed bytes and what seals or opens
// them, under the key its Rts's record number names.
struct Staged {
    std::unique_ptr<support::keys::SealedBulk> bulk;
    StagingBuffer bytes;
};

}  // namespace bmi::method::ofi
