// SPDX-License-Identifier: LGPL-2.1-or-later
// The provider's address vector as the method uses it: one entry per endpoint name, made at
// the first hello or lookup that names it and removed when the method forgets its peer.
//
// libfabric counts repeated inserts of one address and keeps the entry until as many removes
// came, yet shm's remove frees its own slot at the first one; so an endpoint is inserted once
// here, however often it is named. Endpoints are told apart by their text (address_of_name),
// which is the same for every spelling of one address in bytes (sockaddr padding, the bytes
// after an shm name). Without removal an address vector only grows: shm holds 256
// entries, so a server would refuse its 257th client ever, and every departed peer of rxm
// would stay in memory.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace bmi::method::ofi {

class AddressTable {
public:
    // The entry of `endpoint`, made from its provider address `name` if it has none: the
    // provider's fi_addr, or FI_ADDR_NOTAVAIL when the provider takes no more (or refuses it).
    fi_addr_t insert(fid_av* av, const std::string& endpoint, const std::vector<std::byte>& name);
    // Removes addr's entry from the provider; nothing if it has none.
    void remove(fid_av* av, fi_addr_t addr);
    // Forgets addr's entry without telling the provider, which keeps it (see OfiMethod's
    // erase_peer: a peer endpoint of this process that closed first).
    void abandon(fi_addr_t addr);
    bool holds(fi_addr_t addr) const { return endpoints_.count(addr) != 0; }
    bool holds(const std::string& endpoint) const { return by_endpoint_.count(endpoint) != 0; }
    // The endpoint text of addr's entry, or "".
    std::string endpoint_of(fi_addr_t addr) const {
        auto it = endpoints_.find(addr);
        return it == endpoints_.end() ? std::string() : it->second;
    }

private:
    std::unordered_map<std::string, fi_addr_t> by_endpoint_;
    std::unordered_map<fi_addr_t, std::string> endpoints_;
};

}  // namespace bmi::method::ofi
