// SPDX-License-Identifier: LGPL-2.1-or-later
// What one tcp peer can make us hold and how long we wait on it, read from the settings.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "methods/early_budget.hpp"
#include "support/settings/settings.hpp"

namespace bmi::method::tcp {

// What one peer can make us hold, and how long we wait on it (doc/RELIABILITY.md). Only
// load_limits sets them, from Config's settings: tcp_settings.cpp has each one's setting,
// default and range, and nothing here repeats them.
struct Limits {
    // Early data: eager payloads and announcements (RTS, legacy rendezvous headers) that no
    // receive has claimed yet. Each arrival also costs arrival_overhead, which bounds their
    // count. Over either bound the connection is no longer read until receives claim some.
    EarlyBudget::Limits early;
    // A frame started and not finished, or DATA owed after our CTS, with no byte for this long
    // closes the connection.
    std::chrono::milliseconds stall_timeout{};
    // A large send whose RTS the receiver has neither cleared nor refused for this long fails
    // with -BMI_ETIMEDOUT, unpinning its buffer.
    std::chrono::milliseconds rendezvous_timeout{};
    // Bytes queued for a peer that takes none of them for this long close the connection and
    // fail its sends, so a peer that stops reading cannot hold them forever.
    std::chrono::milliseconds send_timeout{};
    // An accepted connection must finish its handshake this long after the accept, however
    // slowly it sends: one that says nothing holds a descriptor no longer.
    std::chrono::milliseconds setup_timeout{};
    // Accepted connections not yet through their handshake, per source address.
    std::size_t pending_per_source = 0;
    // Room reserved by our GRANTs, and held by granted messages no receive has claimed
    // (tcp_grants.cpp).
    EarlyBudget::Limits grants;
};
// The bookkeeping an arrival costs beyond its payload (the record, the queue slot): it makes
// an endless stream of empty frames or announcements as bounded as one of large frames.
inline constexpr bmi_size_t arrival_overhead = 256;
// What a GRANT of `size` holds against the grant budget: the message and an arrival's
// bookkeeping, which is what it costs if it has to be buffered.
inline std::int64_t grant_reservation(bmi_size_t size) { return size + arrival_overhead; }

// The limits from the instance's settings (checked when they were read).
void load_limits(const support::Settings& settings, Limits& out);

}  // namespace bmi::method::tcp
