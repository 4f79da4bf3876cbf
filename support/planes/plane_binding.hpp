// SPDX-License-Identifier: LGPL-2.1-or-later
// What an instance does on one allocated plane of this node: the allocation (the RM's word,
// the same on every node) turned into local facts — the address this node has on the plane,
// the ports this process listens on, the QoS code point and pacing it asks the OS for.
// Methods get their bindings in method::Config and never read allocations themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/planes/allocation.hpp"
#include "support/planes/cidr.hpp"

namespace bmi::support::planes {

struct PlaneBinding {
    std::string allocation_id;
    PlaneType type = PlaneType::tcp;
    std::string plane;  // the identifier as allocated: "10.20.0.0/16", "rxe0:1", "node7"

    // tcp
    Cidr subnet;                       // the plane; prefix 0 means every address
    std::string local_host;            // this node's address on it ("0.0.0.0" / "::" for /0)
    std::vector<std::uint16_t> ports;  // the ports this process listens on, one per endpoint

    // verbs
    std::string device;  // "rxe0"
    int device_port = 0;

    // ofi: the provider the method must use, and its domain ("" = the provider's choice)
    std::string ofi_provider;  // "tcp", "verbs", "cxi"
    std::string ofi_domain;    // "mlx5_0", "cxi0"

    std::string qos;            // as allocated, "" for none
    std::optional<int> dscp;    // the code point the OS is asked for; nullopt: none or unknown
    double bandwidth_mbps = 0;  // 0: unpaced
};

// Binds `allocation` on this node. `slice` is this process's index among the processes of the
// node that share the allocation (PMIx's local rank, else 0): it listens on ports
// [slice * endpts, (slice + 1) * endpts) of the allocated set, so siblings never collide.
// 0, or -BMI_E* with `error` naming the allocation and the field:
//   -BMI_EADDRNOTAVAIL  no interface of this node is on the tcp plane; the verbs device or
//                       port is not here; the shm plane is another node;
//   -BMI_EINVAL         the slice runs past the allocated ports; a verbs plane given as a GID
//                       prefix (only device:port planes are bound).
// Whether an ofi plane's provider and domain exist is the ofi method's to check when it opens
// them (it is the one that loads libfabric).
int bind_allocation(const Allocation& allocation, std::uint32_t slice, PlaneBinding& out,
                    std::string& error);

// This node's first address inside `subnet` on an interface that is up ("0.0.0.0" / "::" for
// a /0 subnet), or nullopt.
std::optional<std::string> local_address_in(const Cidr& subnet);

// One note for each thing the OS is asked to do on the plane and each thing it cannot do,
// for the log and bmi-info: "qos cs1: DSCP 8 (IP_TOS 0x20, SO_PRIORITY 1) ...", "qos gold: not
// a level libbmi can map ...; not enforced on this node", "bw 200 Mbit/s: SO_MAX_PACING_RATE".
struct EnforcementNote {
    std::string text;
    bool enforced = true;  // false: carried but not enforced here (logged as a warning)
};
std::vector<EnforcementNote> enforcement_notes(const PlaneBinding& binding);

// "tcp 10.20.0.0/16 (bmi.pfs) on 10.20.3.4 ports 32000,32001": for log lines and bmi-info.
std::string describe(const PlaneBinding& binding);

}  // namespace bmi::support::planes
