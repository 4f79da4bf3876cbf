// SPDX-License-Identifier: LGPL-2.1-or-later
// The address reference list: one BMI_addr_t per peer, mapping it to the method that owns the
// peer, the method's Peer object and the strings the application used or will be shown.
// BMI_addr_t values come from an IdGenerator, so a dropped address is rejected, never reused
// by accident. Not thread safe: the control layer holds its state lock.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "methods/method.hpp"
#include "support/id_generator/id_generator.hpp"

namespace bmi::core {

struct AddressEntry {
    BMI_addr_t addr = 0;
    int method_index = 0;
    std::shared_ptr<method::Peer> peer;
    std::string id_string;    // what BMI_addr_lookup was given ("" for peers that contacted us)
    std::string rev_string;   // last answer of BMI_addr_rev_lookup, kept for its c_str()
    std::string host_string;  // last answer of BMI_addr_rev_lookup_unexpected
    // BMI_INC_ADDR_REF / BMI_DEC_ADDR_REF, and with BMI_AUTO_REF_COUNT one per unexpected
    // message reported. Starts at 0, as in OrangeFS: the count only keeps an address whose
    // peer is gone (Method::peer_gone) from being dropped.
    int ref_count = 0;
    // Unexpected messages from this peer no test call has reported yet: their address must
    // stay valid until the application has seen them.
    int unreported_unexpected = 0;
    bool gone_queued = false;  // on AddressBook::gone_peers_ already
};

class ReferenceList {
public:
    ReferenceList() = default;
    ReferenceList(const ReferenceList&) = delete;
    ReferenceList& operator=(const ReferenceList&) = delete;
    ~ReferenceList() = default;

    // Registers peer (which must not be registered yet) and sets peer->addr().
    AddressEntry& add(int method_index, std::shared_ptr<method::Peer> peer, std::string id_string);
    AddressEntry* find(BMI_addr_t addr) const;
    AddressEntry* find_by_string(std::string_view id_string) const;
    // Forgets addr; the Peer lives on while operations hold it.
    void erase(BMI_addr_t addr);
    std::size_t size() const { return ids_.size(); }

    template <class F>
    void for_each(F&& f) const {
        for (const auto& [addr, entry] : entries_) f(*entry);
    }

private:
    support::IdGenerator ids_;
    std::unordered_map<std::string, BMI_addr_t> by_string_;
    std::unordered_map<BMI_addr_t, std::unique_ptr<AddressEntry>> entries_;
};

}  // namespace bmi::core
