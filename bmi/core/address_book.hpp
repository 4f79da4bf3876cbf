// SPDX-License-Identifier: LGPL-2.1-or-later
// The addresses of one instance: the reference list, lookups (address lists and alias schemes
// included), reverse lookups, and when an address stops existing (address_lifetime.cpp).
// Its bookkeeping is guarded by the instance's state lock, which it shares with the other
// parts of the instance; it calls into a method only without that lock.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bmi/core/method_set.hpp"
#include "bmi/core/reference_list.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

class AddressBook {
public:
    AddressBook(support::Mutex& state, MethodSet& methods) : state_(state), methods_(methods) {}
    AddressBook(const AddressBook&) = delete;
    AddressBook& operator=(const AddressBook&) = delete;

    // For a caller that holds the instance's state lock under its own name: the analysis
    // cannot see that it is this one.
    void assert_held() const BMI_ASSERT_CAPABILITY(state_) { state_.assert_held(); }

    int lookup(std::string_view id_string, BMI_addr_t& out);
    // Pointer valid until the address is dropped or the next rev lookup of it; nullptr if bad.
    const char* rev_lookup(BMI_addr_t addr);
    const char* rev_lookup_unexpected(BMI_addr_t addr);
    int query_range(BMI_addr_t addr, std::string_view id_string, int netmask);
    // The peer behind addr and its method's index, copied under the state lock so the caller
    // may use them after it (the shared_ptr keeps the peer alive); false for an unknown addr.
    bool peer_of(BMI_addr_t addr, std::shared_ptr<method::Peer>& peer, int& method_index);
    // The index of addr's method, or -1 for an unknown addr.
    int method_of(BMI_addr_t addr);
    // How many addresses are held, once those known to be free are dropped.
    int count();
    // True if addr is known and nothing references it (BMI_DROP_ADDR_QUERY).
    bool unreferenced(BMI_addr_t addr);

    // address_lifetime.cpp: BMI_DROP_ADDR, and BMI_INC_ADDR_REF / BMI_DEC_ADDR_REF.
    int drop(BMI_addr_t addr);
    int change_reference(BMI_addr_t addr, int option);
    // Drops every address filed by peer_gone that nothing holds any more (cheap when there is
    // none). No lock held by the caller.
    void drop_gone_peers();

    // Sink::register_peer and Sink::peer_gone (the method's lock held by the caller).
    BMI_addr_t register_peer(int method_index, const std::shared_ptr<method::Peer>& peer);
    void peer_gone(const method::Peer& peer);

    AddressEntry* find_locked(BMI_addr_t addr) BMI_REQUIRES(state_) { return entries_.find(addr); }
    // The address of an unexpected message's sender, registered if new, and held until a test
    // call reports the message (unexpected_reported_locked).
    BMI_addr_t hold_for_unexpected_locked(int method_index,
                                          const std::shared_ptr<method::Peer>& peer)
        BMI_REQUIRES(state_);
    // A test call reported a message from addr: the hold ends, and with BMI_AUTO_REF_COUNT
    // the application holds a reference instead.
    void unexpected_reported_locked(BMI_addr_t addr, bool take_reference) BMI_REQUIRES(state_);

private:
    // False for a handle looked up by another method's address (a same-node tcp address
    // reached over shm): its reverse lookup is the string looked up.
    bool names_own_method(const AddressEntry& entry) const;
    // The method's lookup of `address` (with hint, if any), registered under `looked_up`
    // unless the peer has a handle already; 0 and out, or the method's -BMI_E*.
    int register_lookup(MethodSlot& slot, std::string_view address, const method::LookupHint* hint,
                        std::string_view looked_up, BMI_addr_t& out);
    // Asks the address's method for a string about the peer and keeps it in entry->*store,
    // whose c_str() is returned (nullptr for an unknown address).
    const char* peer_string(BMI_addr_t addr,
                            std::string (method::Method::*describe)(const method::Peer&) const,
                            std::string AddressEntry::*store);
    // Puts entry on gone_peers_ unless it is there already.
    void file_gone_locked(AddressEntry& entry) BMI_REQUIRES(state_);
    // Drops addr if nothing holds it any more: no reference, no unreported unexpected
    // message, and its method says the peer is gone. No lock held by the caller.
    void drop_if_gone(BMI_addr_t addr);

    support::Mutex& state_;  // the instance's state lock
    MethodSet& methods_;
    ReferenceList entries_ BMI_GUARDED_BY(state_);
    // Addresses whose peers a method reported gone, waiting for drop_gone_peers (run by every
    // test call; OrangeFS runs its forget list in BMI_testunexpected). One entry per address
    // at most (AddressEntry::gone_queued).
    std::vector<BMI_addr_t> gone_peers_ BMI_GUARDED_BY(state_);
    std::atomic<bool> gone_pending_{false};  // gone_peers_ may be non-empty
};

}  // namespace bmi::core
