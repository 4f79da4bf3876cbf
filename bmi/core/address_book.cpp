// SPDX-License-Identifier: LGPL-2.1-or-later
// Lookups, reverse lookups and ranges. When an address stops existing is address_lifetime.cpp.
#include "bmi/core/address_book.hpp"

#include "bmi/core/address_choice.hpp"
#include "methods/method_table.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/method_address/this_node.hpp"

namespace bmi::core {

int AddressBook::lookup(std::string_view id_string, BMI_addr_t& out) {
    if (id_string.size() >= BMI_MAX_ADDR_LEN) return -BMI_EINVAL;
    // The string as given names the handle, also for a list: reverse lookups return it.
    const std::string_view looked_up = id_string;
    {
        support::MutexLock lock(state_);
        if (AddressEntry* entry = entries_.find_by_string(looked_up)) {
            out = entry->addr;
            return 0;
        }
    }
    if (id_string.find(',') != std::string_view::npos) {
        // One peer's addresses on several methods: look up the part this process should use.
        const AddressChoice choice = choose_address(
            id_string,
            [this](std::string_view scheme) {
                int unused = 0;
                return methods_.slot_for_scheme(scheme, unused) != nullptr &&
                       methods_.allocation().reachable(scheme);
            },
            [](std::string_view host) { return support::names_this_node(std::string(host)); });
        if (choice.error != 0) return choice.error;
        BMI_LOG(address, "lookup %.*s: using %.*s", static_cast<int>(id_string.size()),
                id_string.data(), static_cast<int>(choice.part.size()), choice.part.data());
        id_string = choice.part;
    }
    auto parts = support::split_scheme(id_string);
    if (!parts) return -BMI_EINVAL;
    int rc = 0;
    MethodSlot* slot = methods_.slot_for_scheme(parts->scheme, rc);
    if (slot == nullptr) return rc;
    if (!methods_.allocation().reachable(parts->scheme)) {
        BMI_LOG(address, "lookup %.*s: refused, the allocation in force (%s) has no %.*s plane",
                static_cast<int>(id_string.size()), id_string.data(),
                methods_.allocation().origin().c_str(), static_cast<int>(parts->scheme.size()),
                parts->scheme.data());
        return -BMI_ENETUNREACH;
    }
    // An alias (ib://) reaches the method under the method's own scheme.
    const std::string canonical = method::canonical_address(id_string);
    id_string = canonical;
    // A server on this node that offers shm is reached there (same_node.cpp); the handle
    // keeps the name looked up.
    if (auto same_node = methods_.same_node_route(*slot, id_string)) {
        rc = register_lookup(methods_.slot(same_node->shm_index),
                             "shm://" + same_node->hint.route->offer().shm_name, &same_node->hint,
                             looked_up, out);
        if (rc == 0) return 0;
    }
    if (rc = methods_.start_client(*slot); rc != 0) return rc;
    // Name resolution may take as long as the resolver likes: do it before taking any lock.
    std::unique_ptr<method::LookupHint> hint;
    if (slot->descriptor->prepare_lookup != nullptr) {
        rc = slot->descriptor->prepare_lookup(id_string, hint);
        if (rc != 0) return rc;
    }
    return register_lookup(*slot, id_string, hint.get(), looked_up, out);
}

int AddressBook::register_lookup(MethodSlot& slot, std::string_view address,
                                 const method::LookupHint* hint, std::string_view looked_up,
                                 BMI_addr_t& out) {
    std::shared_ptr<method::Peer> peer;
    int rc = 0;
    {
        support::MutexLock lock(slot.lock);
        rc = hint != nullptr ? slot.method->lookup_prepared(address, *hint, peer)
                             : slot.method->lookup(address, peer);
    }
    if (rc != 0) return rc;
    support::MutexLock lock(state_);
    // Someone else registered the same peer meanwhile, or it contacted us before.
    if (peer->addr() != 0 && entries_.find(peer->addr()) != nullptr) {
        out = peer->addr();
        return 0;
    }
    out = entries_.add(slot.index, std::move(peer), std::string(looked_up)).addr;
    BMI_LOG(address, "lookup %.*s -> %lld (%.*s)", static_cast<int>(looked_up.size()),
            looked_up.data(), static_cast<long long>(out), static_cast<int>(address.size()),
            address.data());
    return 0;
}

const char* AddressBook::peer_string(BMI_addr_t addr,
                                     std::string (method::Method::*describe)(const method::Peer&)
                                         const,
                                     std::string AddressEntry::*store) {
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    if (!peer_of(addr, peer, index)) return nullptr;
    std::string text;
    {
        MethodSlot& slot = methods_.slot(index);
        support::MutexLock lock(slot.lock);
        text = (slot.method.get()->*describe)(*peer);
    }
    support::MutexLock lock(state_);
    AddressEntry* entry = entries_.find(addr);
    if (entry == nullptr) return nullptr;
    // Keep the old storage when nothing changed, so earlier pointers stay valid.
    if (entry->*store != text) entry->*store = std::move(text);
    return (entry->*store).c_str();
}

const char* AddressBook::rev_lookup(BMI_addr_t addr) {
    {
        // A list, an address under an alias scheme (ib://), or a tcp address a same-node
        // server is reached at over shm, is answered as looked up, as OrangeFS's BMI does:
        // OrangeFS matches the answer against the Alias lines of its configuration.
        support::MutexLock lock(state_);
        AddressEntry* entry = entries_.find(addr);
        if (entry != nullptr && (entry->id_string.find(',') != std::string::npos ||
                                 method::canonical_address(entry->id_string) != entry->id_string ||
                                 !names_own_method(*entry))) {
            if (entry->rev_string != entry->id_string) entry->rev_string = entry->id_string;
            return entry->rev_string.c_str();
        }
    }
    return peer_string(addr, &method::Method::describe_peer, &AddressEntry::rev_string);
}

bool AddressBook::names_own_method(const AddressEntry& entry) const {
    const auto parts = support::split_scheme(entry.id_string);
    // Peers that contacted us first are named by their method: nothing to compare.
    return !parts || parts->scheme == methods_.slot(entry.method_index).descriptor->scheme;
}

const char* AddressBook::rev_lookup_unexpected(BMI_addr_t addr) {
    return peer_string(addr, &method::Method::peer_host, &AddressEntry::host_string);
}

bool AddressBook::peer_of(BMI_addr_t addr, std::shared_ptr<method::Peer>& peer, int& method_index) {
    support::MutexLock lock(state_);
    AddressEntry* entry = entries_.find(addr);
    if (entry == nullptr) return false;
    peer = entry->peer;
    method_index = entry->method_index;
    return true;
}

int AddressBook::query_range(BMI_addr_t addr, std::string_view id_string, int netmask) {
    auto parts = support::split_scheme(id_string);
    if (!parts) return -BMI_EINVAL;
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    if (!peer_of(addr, peer, index)) return -BMI_EINVAL;
    MethodSlot& slot = methods_.slot(index);
    if (slot.descriptor->scheme != method::canonical_scheme(parts->scheme))
        return 0;  // another network entirely
    const std::string canonical = method::canonical_address(id_string);
    support::MutexLock lock(slot.lock);
    return slot.method->query_range(*peer, canonical, netmask);
}

int AddressBook::method_of(BMI_addr_t addr) {
    support::MutexLock lock(state_);
    AddressEntry* entry = entries_.find(addr);
    return entry == nullptr ? -1 : entry->method_index;
}

int AddressBook::count() {
    drop_gone_peers();
    support::MutexLock lock(state_);
    return static_cast<int>(entries_.size());
}

bool AddressBook::unreferenced(BMI_addr_t addr) {
    support::MutexLock lock(state_);
    AddressEntry* entry = entries_.find(addr);
    return entry != nullptr && entry->ref_count == 0;
}

BMI_addr_t AddressBook::register_peer(int method_index, const std::shared_ptr<method::Peer>& peer) {
    support::MutexLock lock(state_);
    if (peer->addr() != 0 && entries_.find(peer->addr()) != nullptr) return peer->addr();
    return entries_.add(method_index, peer, "").addr;
}

BMI_addr_t AddressBook::hold_for_unexpected_locked(int method_index,
                                                   const std::shared_ptr<method::Peer>& peer) {
    AddressEntry* entry = peer->addr() == 0 ? nullptr : entries_.find(peer->addr());
    if (entry == nullptr) entry = &entries_.add(method_index, peer, "");
    ++entry->unreported_unexpected;
    return entry->addr;
}

void AddressBook::unexpected_reported_locked(BMI_addr_t addr, bool take_reference) {
    if (AddressEntry* entry = entries_.find(addr)) {
        --entry->unreported_unexpected;
        if (take_reference) ++entry->ref_count;
    }
}

}  // namespace bmi::core
