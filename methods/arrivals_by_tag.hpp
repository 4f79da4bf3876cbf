// SPDX-License-Identifier: LGPL-2.1-or-later
// Messages that came from a peer before their receive was posted, found by tag.
//
// A peer may park up to its early budget of them (tcp: 32,768 at the defaults). In one list
// in arrival order, every receive would walk them all to find the oldest of its tag: a peer
// that parked thousands on a tag nobody reads would make each later receive cost that walk.
// Here a receive costs a lookup. Messages of one tag keep their order (a multimap inserts an
// equal key after the ones it already holds), which is all BMI's matching promises; messages
// of different tags are independent. T needs a `tag` member.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <utility>

#include "bmi-types.h"

namespace bmi::method {

template <typename T>
class ArrivalsByTag {
public:
    bool empty() const { return by_tag_.empty(); }
    std::size_t size() const { return by_tag_.size(); }

    void push(T message) {
        const bmi_msg_tag_t tag = message.tag;
        by_tag_.emplace(tag, std::move(message));
    }

    // A message older than every other of its tag: it goes first.
    void push_oldest(T message) {
        const bmi_msg_tag_t tag = message.tag;
        by_tag_.emplace_hint(by_tag_.lower_bound(tag), tag, std::move(message));
    }

    // The oldest message of tag, removed; none if no message has that tag.
    std::optional<T> take(bmi_msg_tag_t tag) {
        auto it = by_tag_.find(tag);  // the first of equal keys: the oldest
        if (it == by_tag_.end()) return std::nullopt;
        T message = std::move(it->second);
        by_tag_.erase(it);
        return message;
    }

    // Removes every message dead(message) is true of, calling gone(message) for each first.
    template <typename Dead, typename Gone>
    void remove_if(Dead&& dead, Gone&& gone) {
        for (auto it = by_tag_.begin(); it != by_tag_.end();) {
            if (!dead(it->second)) {
                ++it;
                continue;
            }
            gone(it->second);
            it = by_tag_.erase(it);
        }
    }

    template <typename Visit>
    void for_each(Visit&& visit) const {
        for (const auto& entry : by_tag_) visit(entry.second);
    }

    void clear() { by_tag_.clear(); }

private:
    std::multimap<bmi_msg_tag_t, T> by_tag_;
};

}  // namespace bmi::method
