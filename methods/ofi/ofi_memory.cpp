// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_memory.hpp"

#include <cstdlib>

#include "bmi-types.h"

namespace bmi::method::ofi {

namespace {
constexpr std::uint64_t local_access = FI_SEND | FI_RECV;
constexpr std::size_t page = 4096;
}  // namespace

int Registrations::acquire(void* data, std::size_t size, bool send, void*& desc, fid_mr*& own) {
    desc = nullptr;
    own = nullptr;
    if (domain_ == nullptr || size == 0) return 0;
    const auto start = reinterpret_cast<std::uintptr_t>(data);
    if (auto it = regions_.upper_bound(start); it != regions_.begin()) {
        --it;
        if (start + size <= it->first + it->second.first) {
            desc = fi_mr_desc(it->second.second);
            return 0;
        }
    }
    if (fi_mr_reg(domain_, data, size, send ? FI_SEND : FI_RECV, 0, 0, 0, &own, nullptr) != 0) {
        own = nullptr;
        return -BMI_ENOMEM;
    }
    desc = fi_mr_desc(own);
    return 0;
}

void Registrations::release(fid_mr*& own) {
    if (own != nullptr) fi_close(&own->fid);
    own = nullptr;
}

void* Registrations::allocate(std::size_t size) {
    if (domain_ == nullptr || size == 0) return nullptr;
    void* data = std::aligned_alloc(page, (size + page - 1) / page * page);
    if (data == nullptr) return nullptr;
    fid_mr* mr = nullptr;
    if (fi_mr_reg(domain_, data, size, local_access, 0, 0, 0, &mr, nullptr) != 0) {
        std::free(data);
        return nullptr;
    }
    regions_[reinterpret_cast<std::uintptr_t>(data)] = {size, mr};
    return data;
}

bool Registrations::free(void* data) {
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(data));
    if (it == regions_.end()) return false;
    fi_close(&it->second.second->fid);
    regions_.erase(it);
    std::free(data);
    return true;
}

void Registrations::clear() {
    for (auto& [start, region] : regions_) {
        fi_close(&region.second->fid);
        std::free(reinterpret_cast<void*>(start));
    }
    regions_.clear();
}

}  // namespace bmi::method::ofi
