// SPDX-License-Identifier: LGPL-2.1-or-later
// Messages kept for receives not yet posted (VerbsPeer::arrivals), within the early-data
// budget (verbs_early_peer_bytes, verbs_early_total_bytes).
//
// Its own object because keeping an arrival charges the budget and dropping one releases it,
// in one place: nothing is kept that is not counted, and a peer's departure gives back all.
#pragma once

#include <cstdint>

#include "methods/early_budget.hpp"
#include "methods/verbs/verbs_connection.hpp"

namespace bmi::method::verbs {

class VerbsEarlyArrivals {
public:
    void set_limits(EarlyBudget::Limits limits) { budget_.set_limits(limits); }
    // Keeps arrival for c's peer (copying an eager payload), charged to the budget; false
    // (nothing kept) if it does not fit: the message then waits parked in its SRQ buffer and
    // its credit is held back, so the sender waits.
    bool keep(Connection& c, Arrival arrival, const std::uint8_t* payload);
    // An arrival left peer's list (matched, cancelled, or its connection failed).
    void uncharge(VerbsPeer& peer, const Arrival& arrival);
    // Every arrival of peer goes, and its charge with it.
    void drop(VerbsPeer& peer);
    // What the arrivals of every peer hold.
    std::int64_t total() const { return budget_.total(); }

private:
    EarlyBudget budget_;
};

}  // namespace bmi::method::verbs
