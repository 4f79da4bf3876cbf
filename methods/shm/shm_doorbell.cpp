// SPDX-License-Identifier: LGPL-2.1-or-later
// Creating and mapping doorbells, and handing out their indices; the protocol is in the header.
#include "methods/shm/shm_doorbell.hpp"

#include <algorithm>
#include <cerrno>
#include <functional>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "bmi-types.h"
#include "methods/shm/shm_memfd.hpp"
#include "support/error/error_map.hpp"

namespace bmi::method::shm {

namespace {
constexpr std::uint32_t doorbell_magic = 0x4c4c4542u;  // "BELL"
}  // namespace

Doorbell::~Doorbell() {
    unmap();
    if (fd_ >= 0) close(fd_);
}

Doorbell::Doorbell(Doorbell&& other) noexcept { *this = std::move(other); }

Doorbell& Doorbell::operator=(Doorbell&& other) noexcept {
    if (this != &other) {
        unmap();
        if (fd_ >= 0) close(fd_);
        layout_ = std::exchange(other.layout_, nullptr);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

int Doorbell::create() {
    int fd = create_sealed_memfd("libbmi-shm-doorbell", sizeof(DoorbellLayout));
    if (fd < 0) return fd;
    void* base = mmap(nullptr, sizeof(DoorbellLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int rc = support::bmi_error_from_errno(errno);
        close(fd);
        return rc;
    }
    // A fresh memfd reads as zeros: every bit clear, nobody asleep.
    layout_ = new (base) DoorbellLayout{};
    layout_->magic = doorbell_magic;
    layout_->version = protocol_version;
    fd_ = fd;
    return 0;
}

int Doorbell::attach(int fd) {
    if (!sealed_memfd_of_size(fd, sizeof(DoorbellLayout))) {
        close(fd);
        return -BMI_EPROTO;
    }
    void* base = mmap(nullptr, sizeof(DoorbellLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return support::bmi_error_from_errno(errno);
    unmap();
    layout_ = static_cast<DoorbellLayout*>(base);
    if (layout_->magic != doorbell_magic || layout_->version != protocol_version) {
        unmap();
        return -BMI_EPROTO;
    }
    return 0;
}

void Doorbell::unmap() {
    if (layout_ != nullptr) munmap(layout_, sizeof(DoorbellLayout));
    layout_ = nullptr;
}

long DoorbellIndices::take() {
    if (!free_.empty()) {
        std::pop_heap(free_.begin(), free_.end(), std::greater<>());
        std::uint32_t index = free_.back();
        free_.pop_back();
        return index;
    }
    if (high_water_ == doorbell_capacity) return -1;
    return high_water_++;
}

void DoorbellIndices::give_back(std::uint32_t index) {
    free_.push_back(index);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
}

}  // namespace bmi::method::shm
