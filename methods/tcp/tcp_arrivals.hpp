// SPDX-License-Identifier: LGPL-2.1-or-later
// A tcp peer's arrivals (message headers that came before their receive): found by tag
// (methods/arrivals_by_tag.hpp), and the cookies of the RTS among them by connection, since a
// new RTS must not reuse the cookie of one still waiting. Indexed, so that neither walks every
// parked arrival (up to 32,768 per peer at the defaults) for every receive and every RTS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "methods/arrivals_by_tag.hpp"
#include "methods/method.hpp"

namespace bmi::method::tcp {

// A message header that arrived before a matching receive was posted.
struct Arrival {
    enum class Kind : std::uint8_t {
        eager,        // payload already read into data
        rts,          // v2 rendezvous: the sender waits for our CTS, nothing is buffered
        legacy_rend,  // legacy rendezvous: its payload is still in the socket, reading paused
    };
    Kind kind = Kind::eager;
    bmi_msg_tag_t tag = 0;
    bmi_size_t size = 0;
    std::unique_ptr<std::uint8_t[]> data;
    std::uint64_t connection_id = 0;  // rts, legacy_rend: where the rest of it comes from
    std::uint64_t cookie = 0;         // rts
    // eager: it came under a GRANT, and its size stays charged to the peer's grant account
    // (not the early-data budget) until a receive claims it.
    bool granted = false;
};

class Arrivals {
public:
    bool empty() const { return by_tag_.empty(); }
    std::size_t size() const { return by_tag_.size(); }

    void push(Arrival arrival) {
        if (arrival.kind == Arrival::Kind::rts)
            cookies_.emplace(arrival.connection_id, arrival.cookie);
        by_tag_.push(std::move(arrival));
    }

    // The oldest arrival of tag, removed; none if no arrival has that tag.
    std::optional<Arrival> take(bmi_msg_tag_t tag) {
        auto arrival = by_tag_.take(tag);
        if (arrival) forget_cookie(*arrival);
        return arrival;
    }

    // An RTS still waiting for its receive announced cookie on connection.
    bool announced(std::uint64_t connection, std::uint64_t cookie) const {
        return cookies_.count({connection, cookie}) != 0;
    }

    // Removes every arrival dead(arrival) is true of, calling gone(arrival) for each first.
    template <typename Dead, typename Gone>
    void remove_if(Dead&& dead, Gone&& gone) {
        by_tag_.remove_if(dead, [&](const Arrival& a) {
            forget_cookie(a);
            gone(a);
        });
    }

    template <typename Visit>
    void for_each(Visit&& visit) const {
        by_tag_.for_each(visit);
    }

    void clear() {
        by_tag_.clear();
        cookies_.clear();
    }

private:
    void forget_cookie(const Arrival& a) {
        if (a.kind == Arrival::Kind::rts) cookies_.erase({a.connection_id, a.cookie});
    }

    ArrivalsByTag<Arrival> by_tag_;
    std::set<std::pair<std::uint64_t, std::uint64_t>> cookies_;  // (connection id, cookie)
};

}  // namespace bmi::method::tcp
