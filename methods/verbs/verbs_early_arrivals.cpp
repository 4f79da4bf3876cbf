// SPDX-License-Identifier: LGPL-2.1-or-later
// Messages kept for receives not yet posted (verbs_early_arrivals.hpp).
#include "methods/verbs/verbs_early_arrivals.hpp"

#include <cstring>

#include "support/logging/log.hpp"

namespace bmi::method::verbs {

namespace {
// What keeping an arrival costs: its record and what it points to.
std::int64_t early_cost(const Arrival& a) {
    const auto described = static_cast<std::int64_t>(a.segments.size() * sizeof(RemoteSegment));
    return static_cast<std::int64_t>(sizeof(Arrival)) + described + (a.rts ? 0 : a.size);
}
}  // namespace

bool VerbsEarlyArrivals::keep(Connection& c, Arrival arrival, const std::uint8_t* payload) {
    VerbsPeer& peer = *c.peer;
    if (!budget_.fits(peer.early, early_cost(arrival))) {
        if (c.parked.empty())  // once per stretch: retries come from the parked queue
            BMI_LOG(verbs, "verbs: early data of %s over budget (%lld bytes; %lld for all peers)",
                    peer_address(peer).c_str(), static_cast<long long>(peer.early.bytes),
                    static_cast<long long>(budget_.total()));
        return false;
    }
    if (!arrival.rts && arrival.size > 0) {
        arrival.data.reset(new std::uint8_t[static_cast<std::size_t>(arrival.size)]);
        std::memcpy(arrival.data.get(), payload, static_cast<std::size_t>(arrival.size));
    }
    budget_.charge(peer.early, early_cost(arrival));
    peer.arrivals.push(std::move(arrival));
    return true;
}

void VerbsEarlyArrivals::uncharge(VerbsPeer& peer, const Arrival& arrival) {
    budget_.release(peer.early, early_cost(arrival));
}

void VerbsEarlyArrivals::drop(VerbsPeer& peer) {
    peer.arrivals.for_each([&](const Arrival& a) { uncharge(peer, a); });
    peer.arrivals.clear();
}

}  // namespace bmi::method::verbs
