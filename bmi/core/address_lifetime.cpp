// SPDX-License-Identifier: LGPL-2.1-or-later
// When an address stops existing: BMI_DROP_ADDR, the reference count, and peers that are gone.
//
// The rules are OrangeFS's, so that a server written for it (pvfs2-server, IOFSL) keeps its
// clients' addresses exactly as long as it expects:
//  - a count starts at 0; BMI_INC_ADDR_REF / BMI_DEC_ADDR_REF move it, and with
//    BMI_AUTO_REF_COUNT each unexpected message BMI_testunexpected reports adds 1 (the server
//    gives it back when it has finished with the request);
//  - an address is dropped only when its count is 0 AND its method says nothing can reach the
//    peer again (it connected to us, we cannot connect back, its last connection closed). A
//    count reaching 0 asks at once; a peer going away with the count at 0 is filed and asked
//    about in the next test call (OrangeFS's forget list, which only BMI_testunexpected reads).
// So a live client keeps its address with any count, and a departed one loses it as soon as
// nobody holds it, whatever the application does: a server that forgets its bookkeeping does
// not grow with every client it ever served. libbmi adds one rule: an address stays until the
// application has been shown every unexpected message that came from it.
#include "bmi/core/address_book.hpp"

#include "support/logging/log.hpp"

namespace bmi::core {

int AddressBook::drop(BMI_addr_t addr) {
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    {
        support::MutexLock lock(state_);
        AddressEntry* entry = entries_.find(addr);
        if (entry == nullptr) return -BMI_EINVAL;
        peer = entry->peer;
        index = entry->method_index;
        entries_.erase(addr);
    }
    MethodSlot& slot = methods_.slot(index);
    support::MutexLock lock(slot.lock);
    slot.method->forget_peer(*peer);
    BMI_LOG(address, "dropped %lld", static_cast<long long>(addr));
    return 0;
}

int AddressBook::change_reference(BMI_addr_t addr, int option) {
    {
        support::MutexLock lock(state_);
        AddressEntry* entry = entries_.find(addr);
        if (entry == nullptr) return -BMI_EINVAL;
        if (option == BMI_INC_ADDR_REF) {
            ++entry->ref_count;
            return 0;
        }
        if (entry->ref_count == 0) return -BMI_EINVAL;  // OrangeFS refuses it too
        if (--entry->ref_count > 0) return 0;
    }
    drop_if_gone(addr);
    return 0;
}

void AddressBook::file_gone_locked(AddressEntry& entry) {
    if (entry.gone_queued) return;
    entry.gone_queued = true;
    gone_peers_.push_back(entry.addr);
    gone_pending_.store(true, std::memory_order_release);
}

void AddressBook::peer_gone(const method::Peer& peer) {
    support::MutexLock lock(state_);
    AddressEntry* entry = entries_.find(peer.addr());
    // Already dropped (the method is closing it for drop), or re-registered since.
    if (entry == nullptr || entry->peer.get() != &peer) return;
    file_gone_locked(*entry);
}

void AddressBook::drop_gone_peers() {
    if (!gone_pending_.load(std::memory_order_acquire)) return;
    std::vector<BMI_addr_t> filed;
    {
        support::MutexLock lock(state_);
        filed.swap(gone_peers_);
        gone_pending_.store(false, std::memory_order_relaxed);
        for (BMI_addr_t addr : filed)
            if (AddressEntry* entry = entries_.find(addr)) entry->gone_queued = false;
    }
    for (BMI_addr_t addr : filed) drop_if_gone(addr);
}

void AddressBook::drop_if_gone(BMI_addr_t addr) {
    std::shared_ptr<method::Peer> peer;
    int index = 0;
    // Whether the entry still holds: nobody references it and nothing of it waits to be shown.
    // Unshown messages file it again, for the testunexpected after the one that shows them.
    auto unheld = [&](AddressEntry& entry) {
        state_.assert_held();  // called only inside the locked sections below
        if (entry.ref_count > 0) return false;
        if (entry.unreported_unexpected > 0) {
            file_gone_locked(entry);
            return false;
        }
        return true;
    };
    {
        support::MutexLock lock(state_);
        AddressEntry* entry = entries_.find(addr);
        if (entry == nullptr || !unheld(*entry)) return;
        peer = entry->peer;
        index = entry->method_index;
    }
    MethodSlot& slot = methods_.slot(index);
    // The method's lock is held from the question to the forgetting, so the peer cannot come
    // back in between; the core's lock is taken inside it (the allowed order).
    support::MutexLock method_lock(slot.lock);
    if (!slot.method->peer_gone(*peer)) return;
    {
        support::MutexLock lock(state_);
        AddressEntry* entry = entries_.find(addr);
        if (entry == nullptr || entry->peer != peer || !unheld(*entry)) return;
        entries_.erase(addr);
    }
    slot.method->forget_peer(*peer);
    BMI_LOG(address, "dropped %lld: its peer is gone and nothing refers to it",
            static_cast<long long>(addr));
}

}  // namespace bmi::core
