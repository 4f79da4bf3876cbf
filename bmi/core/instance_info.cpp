// SPDX-License-Identifier: LGPL-2.1-or-later
// Addresses (lookup, reverse lookup, ranges), memory and the info options. When an address
// stops existing (drops, reference counts) is address_lifetime.cpp.
#include "bmi/core/instance.hpp"

#include <cstdlib>
#include <cstring>

#include "bmi/core/address_choice.hpp"
#include "bmi/core/instance_slot.hpp"
#include "methods/method_table.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/method_address/this_node.hpp"

namespace bmi::core {

int Instance::addr_lookup(std::string_view id_string, BMI_addr_t& out) {
    if (id_string.size() >= BMI_MAX_ADDR_LEN) return -BMI_EINVAL;
    // The string as given names the handle, also for a list: reverse lookups return it.
    const std::string_view looked_up = id_string;
    {
        support::MutexLock lock(state_mutex_);
        if (AddressEntry* entry = addresses_.find_by_string(looked_up)) {
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
                return slot_for_scheme(scheme, unused) != nullptr && scheme_reachable(scheme);
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
    MethodSlot* slot = slot_for_scheme(parts->scheme, rc);
    if (slot == nullptr) return rc;
    if (!scheme_reachable(parts->scheme)) {
        BMI_LOG(address, "lookup %.*s: refused, the allocation in force (%s) has no %.*s plane",
                static_cast<int>(id_string.size()), id_string.data(),
                allocation_origin_.c_str(), static_cast<int>(parts->scheme.size()),
                parts->scheme.data());
        return -BMI_ENETUNREACH;
    }
    if (!slot->active.load()) {
        rc = activate(slot->index, method_config(*slot, ""));
        if (rc != 0) return rc;
    }
    // An alias (ib://) reaches the method under the method's own scheme.
    const std::string canonical = method::canonical_address(id_string);
    id_string = canonical;
    // Name resolution may take as long as the resolver likes: do it before taking any lock.
    std::unique_ptr<method::LookupHint> hint;
    if (slot->descriptor->prepare_lookup != nullptr) {
        rc = slot->descriptor->prepare_lookup(id_string, hint);
        if (rc != 0) return rc;
    }
    std::shared_ptr<method::Peer> peer;
    {
        support::MutexLock lock(slot->lock);
        rc = hint ? slot->method->lookup_prepared(id_string, *hint, peer)
                  : slot->method->lookup(id_string, peer);
    }
    if (rc != 0) return rc;
    support::MutexLock lock(state_mutex_);
    // Someone else registered the same peer meanwhile, or it contacted us before.
    if (peer->addr() != 0 && addresses_.find(peer->addr()) != nullptr) {
        out = peer->addr();
        return 0;
    }
    out = addresses_.add(slot->index, std::move(peer), std::string(looked_up)).addr;
    BMI_LOG(address, "lookup %.*s -> %lld", static_cast<int>(id_string.size()), id_string.data(),
            static_cast<long long>(out));
    return 0;
}

const char* Instance::peer_string(BMI_addr_t addr,
                                  std::string (method::Method::*describe)(const method::Peer&)
                                      const,
                                  std::string AddressEntry::*store) {
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    if (!peer_of(addr, peer, index)) return nullptr;
    std::string text;
    {
        MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
        support::MutexLock lock(slot.lock);
        text = (slot.method.get()->*describe)(*peer);
    }
    support::MutexLock lock(state_mutex_);
    AddressEntry* entry = addresses_.find(addr);
    if (entry == nullptr) return nullptr;
    // Keep the old storage when nothing changed, so earlier pointers stay valid.
    if (entry->*store != text) entry->*store = std::move(text);
    return (entry->*store).c_str();
}

const char* Instance::rev_lookup(BMI_addr_t addr) {
    {
        // A list, or an address under an alias scheme (ib://), is answered as looked up, as
        // OrangeFS's BMI does: OrangeFS matches the answer against the Alias lines of its
        // configuration.
        support::MutexLock lock(state_mutex_);
        AddressEntry* entry = addresses_.find(addr);
        if (entry != nullptr && (entry->id_string.find(',') != std::string::npos ||
                                 method::canonical_address(entry->id_string) != entry->id_string)) {
            if (entry->rev_string != entry->id_string) entry->rev_string = entry->id_string;
            return entry->rev_string.c_str();
        }
    }
    return peer_string(addr, &method::Method::describe_peer, &AddressEntry::rev_string);
}

const char* Instance::rev_lookup_unexpected(BMI_addr_t addr) {
    return peer_string(addr, &method::Method::peer_host, &AddressEntry::host_string);
}

bool Instance::peer_of(BMI_addr_t addr, std::shared_ptr<method::Peer>& peer, int& method_index) {
    support::MutexLock lock(state_mutex_);
    AddressEntry* entry = addresses_.find(addr);
    if (entry == nullptr) return false;
    peer = entry->peer;
    method_index = entry->method_index;
    return true;
}

int Instance::query_addr_range(BMI_addr_t addr, std::string_view id_string, int netmask) {
    auto parts = support::split_scheme(id_string);
    if (!parts) return -BMI_EINVAL;
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    if (!peer_of(addr, peer, index)) return -BMI_EINVAL;
    MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
    if (slot.descriptor->scheme != method::canonical_scheme(parts->scheme))
        return 0;  // another network entirely
    const std::string canonical = method::canonical_address(id_string);
    support::MutexLock lock(slot.lock);
    return slot.method->query_range(*peer, canonical, netmask);
}

void* Instance::memalloc(BMI_addr_t addr, bmi_size_t size) {
    void* buffer = allocate_for(addr, size);
    // OrangeFS's request encoder leaves bytes unwritten and counts on its BMI_memalloc having
    // zeroed them; the standalone library's BMI_memalloc is plain malloc (doc/dialects.md).
    if (buffer != nullptr && dialect_ == method::ApiDialect::orangefs)
        std::memset(buffer, 0, static_cast<std::size_t>(size));
    return buffer;
}

void* Instance::allocate_for(BMI_addr_t addr, bmi_size_t size) {
    if (size < 0) return nullptr;
    int index;
    {
        support::MutexLock lock(state_mutex_);
        AddressEntry* entry = addresses_.find(addr);
        if (entry == nullptr) return nullptr;
        index = entry->method_index;
    }
    // A method with registration needs (verbs) or memory its peers map (shm) hands out
    // memory it has prepared.
    {
        MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
        support::MutexLock lock(slot.lock);
        if (slot.method)
            if (void* prepared = slot.method->mem_alloc(size); prepared != nullptr) return prepared;
    }
    // Cache-line alignment helps every method's copies.
    void* buffer = nullptr;
    std::size_t bytes = static_cast<std::size_t>(size > 0 ? size : 1);
    if (posix_memalign(&buffer, 64, bytes) != 0) return nullptr;
    support::MutexLock lock(state_mutex_);
    memalloc_owned_.insert(buffer);
    return buffer;
}

int Instance::memfree(BMI_addr_t, void* buffer) {
    // The buffer alone says whose memory it is. The address it was allocated for may be gone
    // by now (a server drops a client while answers to it are still in flight), and refusing
    // then would leak the buffer for good.
    {
        support::MutexLock lock(state_mutex_);
        if (memalloc_owned_.erase(buffer) != 0) {
            std::free(buffer);
            return 0;
        }
    }
    // Memory a method prepared: ask every method, since an application may free through an
    // address of another method than the one it allocated with.
    for (auto& slot : slots_) {
        support::MutexLock lock(slot->lock);
        if (slot->method && slot->method->mem_free(buffer)) return 0;
    }
    BMI_LOG(error, "BMI_memfree: %p was not allocated by BMI_memalloc or is already freed",
            buffer);
    return -BMI_EINVAL;
}

int Instance::unexpected_free(void* buffer) {
    note_caller();
    {
        support::MutexLock lock(state_mutex_);
        // Unknown or already freed: refuse instead of corrupting the heap.
        if (!uncharge_unexpected(buffer)) return -BMI_EINVAL;
    }
    std::free(buffer);
    // A method may have stopped reading because the quota was full: let it try again.
    wait_point_.signal();
    return 0;
}

int Instance::set_info(BMI_addr_t addr, int option, void* arg) {
    switch (option) {
    case BMI_DROP_ADDR:
        return drop_address(addr);
    case BMI_INC_ADDR_REF:
    case BMI_DEC_ADDR_REF:
        return change_reference(addr, option);
    case BMI_TRUSTED_CONNECTION:
        return trust_sources(arg);
    case BMI_FORCEFUL_CANCEL_MODE:
    case BMI_OPTIMISTIC_BUFFER_REG:
        // Accepted and ignored: a cancel closes a connection only when its operation moved
        // data (doc/architecture.md), and memory needs no registration.
        return 0;
    default:
        break;
    }
    // Method-specific options: to the addressed method, or to every active one for addr 0.
    std::shared_ptr<method::Peer> peer;
    int only = -1;
    if (addr != 0 && !peer_of(addr, peer, only)) return -BMI_EINVAL;
    int rc = -BMI_ENOSYS;
    for (auto& slot : slots_) {
        if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
        support::MutexLock lock(slot->lock);
        int one = slot->method->set_info(peer.get(), option, arg);
        if (one != -BMI_ENOSYS) rc = one;
    }
    return rc;
}

int Instance::get_info(BMI_addr_t addr, int option, void* arg) {
    if (arg == nullptr && option != BMI_CHECK_INIT) return -BMI_EINVAL;
    std::shared_ptr<method::Peer> peer;
    int only = -1;
    if (addr != 0 && !peer_of(addr, peer, only)) return -BMI_EINVAL;
    switch (option) {
    case BMI_CHECK_INIT:
        return 0;
    case BMI_CHECK_MAXSIZE:
    case BMI_GET_UNEXP_SIZE: {
        bmi_size_t best = -1;
        for (auto& slot : slots_) {
            if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
            support::MutexLock lock(slot->lock);
            bmi_size_t value = option == BMI_CHECK_MAXSIZE ? slot->method->max_message_size()
                                                           : slot->method->unexpected_limit();
            // A method may know a smaller limit for one peer (tcp: a legacy peer's 16 MiB).
            bmi_size_t for_peer = 0;
            if (option == BMI_CHECK_MAXSIZE && peer &&
                slot->method->get_info(peer.get(), BMI_CHECK_MAXSIZE, &for_peer) == 0)
                value = for_peer;
            // The safe answer across several methods is the smallest.
            if (best < 0 || value < best) best = value;
        }
        if (best < 0) return -BMI_ENODEV;
        *static_cast<int*>(arg) = best > 0x7fffffff ? 0x7fffffff : static_cast<int>(best);
        return 0;
    }
    case BMI_GET_METH_ADDR:
        if (peer) {
            *static_cast<void**>(arg) = peer.get();
        } else {
            std::string text = listen_addresses();
            support::MutexLock lock(state_mutex_);
            if (listen_string_ != text) listen_string_ = std::move(text);
            *static_cast<const char**>(arg) = listen_string_.c_str();
        }
        return 0;
    case BMI_TRANSPORT_METHODS_STRING: {
        support::MutexLock lock(state_mutex_);
        *static_cast<const char**>(arg) = methods_string_.c_str();
        return 0;
    }
    case BMI_ADDRESS_COUNT: {
        // How many addresses the instance holds: a long-running server watches that it does
        // not grow with every client it ever served. Those already known to be free go first.
        drop_gone_peers();
        support::MutexLock lock(state_mutex_);
        *static_cast<int*>(arg) = static_cast<int>(addresses_.size());
        return 0;
    }
    case BMI_UNEXPECTED_QUOTA_USE:
        return unexpected_quota_use(*static_cast<BMI_unexpected_quota_use*>(arg));
    case BMI_DROP_ADDR_QUERY: {
        // What would decide a drop now: no reference, and the method says the peer is gone.
        if (!peer) return -BMI_EINVAL;
        bool unreferenced = false;
        {
            support::MutexLock lock(state_mutex_);
            AddressEntry* entry = addresses_.find(addr);
            unreferenced = entry != nullptr && entry->ref_count == 0;
        }
        MethodSlot& slot = *slots_[static_cast<std::size_t>(only)];
        support::MutexLock lock(slot.lock);
        *static_cast<int*>(arg) = unreferenced && slot.method->peer_gone(*peer) ? 1 : 0;
        return 0;
    }
    default:
        break;
    }
    int rc = -BMI_ENOSYS;
    for (auto& slot : slots_) {
        if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
        support::MutexLock lock(slot->lock);
        int one = slot->method->get_info(peer.get(), option, arg);
        if (one != -BMI_ENOSYS) return one;
    }
    return rc;
}

int Instance::unexpected_quota_use(BMI_unexpected_quota_use& out) {
    {
        support::MutexLock lock(state_mutex_);
        out.used = unexpected_bytes_;
        out.limit = unexpected_quota_;
    }
    out.blocked_peers = 0;
    // Only a method knows which of its peers it stopped reading; each adds its own count
    // (a method without the option answers -BMI_ENOSYS and adds nothing).
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        (void)slot->method->get_info(nullptr, BMI_UNEXPECTED_QUOTA_USE, &out);
    }
    return 0;
}

std::string Instance::listen_addresses() {
    std::string out;
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        std::string one = slot->method->listen_address();
        if (one.empty()) continue;
        if (!slot->listen_scheme.empty() && slot->listen_scheme != slot->descriptor->scheme)
            one = slot->listen_scheme + one.substr(slot->descriptor->scheme.size());
        if (!out.empty()) out += ',';
        out += one;
    }
    return out;
}

std::string Instance::active_methods() {
    support::MutexLock lock(state_mutex_);
    return methods_string_;
}

}  // namespace bmi::core
