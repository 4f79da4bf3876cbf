// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's entry in the static method table: libfabric's reliable datagram endpoints,
// over whichever provider the address names ("ofi+tcp://host:port", "ofi+shm://name").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "methods/method.hpp"

namespace bmi::method::ofi {

// Creates an ofi instance; with a listen address it binds there. -BMI_ENOSYS without
// libfabric, -BMI_ENOPROTOOPT or -BMI_ENODEV when the provider cannot be opened, -BMI_EINVAL
// for a malformed address.
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

// Resolves an address's host (it may block in getaddrinfo); called without any lock, before
// the method's lookup_prepared.
int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out);

// BMI_get_info(addr or 0, get_stats_option, Stats*): what peers make the instance hold now.
inline constexpr int get_stats_option = 0x6f01;
struct Stats {
    std::uint64_t early_bytes = 0;       // early data kept, all peers (the early budget's total)
    std::uint64_t unproven = 0;          // keyed hellos answered and not yet proven
    std::uint64_t handshakes = 0;        // handshakes under way, either side
    std::uint64_t peers = 0;             // peers known, each an address-vector entry
    std::uint64_t unasked_dropped = 0;   // data messages no receive asked for, dropped so far
    std::uint64_t spare_buffers = 0;     // buffers posted for parked or waiting ones
    std::uint64_t sent_under_grant = 0;  // large messages of ours that skipped RTS and CTS
    std::uint64_t grants_held = 0;       // peers' grants we may still use, all peers
    std::uint64_t handed_wakeups = 0;    // sleeps the control layer took in our epoll set
    std::uint64_t encrypted_peers = 0;   // peers whose traffic is encrypted now
    std::uint64_t records_failed = 0;    // records and large messages' data that failed to open
    std::uint64_t silenced = 0;          // shm: entries kept for forgotten endpoints still open
    std::uint64_t naps = 0;              // naps taken (polled queues: no wait descriptor in use)
    std::uint64_t resets_sent = 0;       // probes of strangers answered with a reset, so far
    std::uint64_t resets_taken = 0;      // peers lost to their proven reset, so far
    std::uint64_t token_mismatches = 0;  // shm: messages under a peer's fi_addr without its token
    std::uint64_t regions_replaced = 0;  // shm: servers found restarted by their region file
    std::uint64_t dead_holders = 0;      // shm: peers found ended holding their region's lock
    std::uint64_t regions_ended = 0;     // shm: servers found ended by their region's process
    std::uint64_t locks_taken_back = 0;  // shm: our region's lock, from a holder that ended
};

inline constexpr Descriptor descriptor{"bmi_ofi", "ofi", &create, &prepare_lookup};

}  // namespace bmi::method::ofi
