// SPDX-License-Identifier: LGPL-2.1-or-later
// Lookups of an address list, "tcp://h:p,shm://name": the addresses one server offers on
// several methods (an OrangeFS server's Alias). The list names one peer; a lookup contacts one
// of its parts, chosen here (doc/architecture.md, "Address lists").
#pragma once

#include <functional>
#include <string_view>

namespace bmi::core {

// Methods in the order a list's parts are preferred: shared memory when the peer is on this
// node, then RDMA, then TCP; a scheme not named here comes after them, in list order.
inline constexpr std::string_view preferred_schemes[] = {"shm", "verbs", "tcp"};

struct AddressChoice {
    std::string_view part;  // the chosen "scheme://rest", empty if none
    int error = 0;          // -BMI_EINVAL (a malformed part), -BMI_ENOPROTOOPT (none usable)
};

// usable(scheme): this process can reach peers of that scheme (compiled, allowed, reachable
// under the allocation in force). on_this_node(host): host names this machine. A part whose
// rest is not "host:port" (shm) is only chosen when the list also names a host of this node, or
// names no host at all: a name like shm://orangefs may be another server on another node. A
// fabric's own address (ofi+efa://0x...) is chosen wherever the list says its server is.
AddressChoice choose_address(std::string_view list,
                             const std::function<bool(std::string_view)>& usable,
                             const std::function<bool(std::string_view)>& on_this_node);

}  // namespace bmi::core
