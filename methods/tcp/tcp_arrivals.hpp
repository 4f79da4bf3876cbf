// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer's arrivals (message headers that came before their receive), found by tag.
//
// A peer may keep up to its early budget of them (32,768 at the defaults). A receive takes
// the oldest of its tag, and a new RTS must not reuse the cookie of one still waiting. Kept
// in one list, both were a walk over every arrival: a peer that parked thousands of messages
// on a tag nobody reads made each of its later receives and RTS frames cost that walk. Here
// both are logarithmic. Arrivals of one tag keep their order (a multimap inserts an equal key
// after the ones it already holds), which is all BMI's matching promises; arrivals of
// different tags are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

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
};

class Arrivals {
public:
    bool empty() const { return by_tag_.empty(); }
    std::size_t size() const { return by_tag_.size(); }

    void push(Arrival arrival) {
        if (arrival.kind == Arrival::Kind::rts)
            cookies_.emplace(arrival.connection_id, arrival.cookie);
        by_tag_.emplace(arrival.tag, std::move(arrival));
    }

    // The oldest arrival of tag, removed; none if no arrival has that tag.
    std::optional<Arrival> take(bmi_msg_tag_t tag) {
        auto it = by_tag_.find(tag);  // the first of equal keys: the oldest
        if (it == by_tag_.end()) return std::nullopt;
        Arrival arrival = std::move(it->second);
        erase(it);
        return arrival;
    }

    // An RTS still waiting for its receive announced cookie on connection.
    bool announced(std::uint64_t connection, std::uint64_t cookie) const {
        return cookies_.count({connection, cookie}) != 0;
    }

    // Removes every arrival dead(arrival) is true of, calling gone(arrival) for each first.
    template <typename Dead, typename Gone>
    void remove_if(Dead&& dead, Gone&& gone) {
        for (auto it = by_tag_.begin(); it != by_tag_.end();) {
            if (!dead(it->second)) {
                ++it;
                continue;
            }
            gone(it->second);
            it = erase(it);
        }
    }

    template <typename Visit>
    void for_each(Visit&& visit) const {
        for (const auto& [tag, arrival] : by_tag_) visit(arrival);
    }

    void clear() {
        by_tag_.clear();
        cookies_.clear();
    }

private:
    using Map = std::multimap<bmi_msg_tag_t, Arrival>;

    Map::iterator erase(Map::iterator it) {
        if (it->second.kind == Arrival::Kind::rts)
            cookies_.erase({it->second.connection_id, it->second.cookie});
        return by_tag_.erase(it);
    }

    Map by_tag_;
    std::set<std::pair<std::uint64_t, std::uint64_t>> cookies_;  // (connection id, cookie)
};

}  // namespace bmi::method::tcp
