// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_address_table.hpp"

namespace bmi::method::ofi {

fi_addr_t AddressTable::insert(fid_av* av, const std::string& endpoint,
                               const std::vector<std::byte>& name) {
    if (auto it = by_endpoint_.find(endpoint); it != by_endpoint_.end()) return it->second;
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(av, name.data(), 1, &addr, 0, nullptr) != 1) return FI_ADDR_NOTAVAIL;
    by_endpoint_.emplace(endpoint, addr);
    endpoints_.insert_or_assign(addr, endpoint);
    return addr;
}

void AddressTable::remove(fid_av* av, fi_addr_t addr) {
    if (!holds(addr)) return;
    abandon(addr);
    fi_addr_t entry = addr;
    (void)fi_av_remove(av, &entry, 1, 0);
}

void AddressTable::abandon(fi_addr_t addr) {
    auto it = endpoints_.find(addr);
    if (it == endpoints_.end()) return;
    by_endpoint_.erase(it->second);
    endpoints_.erase(it);
}

}  // namespace bmi::method::ofi
