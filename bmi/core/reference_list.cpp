// SPDX-License-Identifier: LGPL-2.1-or-later
// Bookkeeping behind ReferenceList; see the header.
#include "bmi/core/reference_list.hpp"

namespace bmi::core {

AddressEntry& ReferenceList::add(int method_index, std::shared_ptr<method::Peer> peer,
                                 std::string id_string) {
    auto entry = std::make_unique<AddressEntry>();
    AddressEntry& ref = *entry;
    ref.addr = ids_.insert(entry.get());
    ref.method_index = method_index;
    ref.peer = std::move(peer);
    ref.peer->set_addr(ref.addr);
    ref.id_string = std::move(id_string);
    if (!ref.id_string.empty()) by_string_.emplace(ref.id_string, ref.addr);
    entries_.emplace(ref.addr, std::move(entry));
    return ref;
}

AddressEntry* ReferenceList::find(BMI_addr_t addr) const {
    return static_cast<AddressEntry*>(ids_.find(addr));
}

AddressEntry* ReferenceList::find_by_string(std::string_view id_string) const {
    auto it = by_string_.find(std::string(id_string));
    return it == by_string_.end() ? nullptr : find(it->second);
}

void ReferenceList::erase(BMI_addr_t addr) {
    auto it = entries_.find(addr);
    if (it == entries_.end()) return;
    AddressEntry& entry = *it->second;
    if (!entry.id_string.empty()) by_string_.erase(entry.id_string);
    // The Peer may outlive this entry (pending ops hold it); it must not point at a dead addr.
    entry.peer->set_addr(0);
    ids_.erase(addr);
    entries_.erase(it);
}

}  // namespace bmi::core
