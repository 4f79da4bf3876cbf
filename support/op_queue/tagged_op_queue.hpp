// SPDX-License-Identifier: LGPL-2.1-or-later
// Receives waiting toward one peer: found by tag, earliest posted first, in O(1) expected time
// however many wait. A server with 100,000 receives posted toward one client must match each
// arriving message as fast as one with none (issue 18), which a single list walked per
// arrival cannot do.
//
// Every op sits on one list of all ops in post order (through in_order_link), so failing or
// refusing every op keeps the order they were posted in. Past linear_limit ops the queue also
// files each op on its tag's list (through by_tag_link), so the earliest op of a tag is a hash
// lookup away; it stays indexed until it is empty again. Below that, a walk of a few ops is
// cheaper than the hash: a ping-pong, with one receive posted at a time, pays nothing for the
// index (doc/perf/code-figures.md, "Tagged op queue"). The queue does not own its ops, as
// OpQueue does not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "support/op_queue/op_queue.hpp"

namespace bmi::support {

template <class T, class Key, class Hook, Hook T::*by_tag_link, Hook T::*in_order_link, Key T::*tag>
class TaggedOpQueue {
    using TagList = OpQueue<T, Hook, by_tag_link>;
    using InOrder = OpQueue<T, Hook, in_order_link>;
    using Lists = std::unordered_map<Key, TagList>;
    using Entry = typename Lists::value_type;

public:
    using iterator = typename InOrder::iterator;
    using const_iterator = typename InOrder::const_iterator;

    TaggedOpQueue() = default;
    TaggedOpQueue(const TaggedOpQueue&) = delete;
    TaggedOpQueue& operator=(const TaggedOpQueue&) = delete;
    ~TaggedOpQueue() { clear(); }

    bool empty() const { return in_order_.empty(); }
    std::size_t size() const { return in_order_.size(); }
    // Every op, in post order.
    iterator begin() { return in_order_.begin(); }
    iterator end() { return in_order_.end(); }
    const_iterator begin() const { return in_order_.begin(); }
    const_iterator end() const { return in_order_.end(); }
    T& front() { return in_order_.front(); }

    // Ops above which the queue indexes them by tag.
    static constexpr std::size_t linear_limit = 16;
    // Tags the index holds a list for, empty lists kept for reuse included (for tests).
    std::size_t indexed_tags() const { return lists_.size(); }

    void push_back(T& op) {
        in_order_.push_back(op);
        if (indexed_) {
            list_for(op.*tag).push_back(op);
        } else if (in_order_.size() > linear_limit) {
            for (T& each : in_order_) list_for(each.*tag).push_back(each);
            indexed_ = true;
        }
    }

    bool contains(Key key) const {
        if (!indexed_) return find_linear(in_order_, key) != in_order_.end();
        auto it = lists_.find(key);
        return it != lists_.end() && !it->second.empty();
    }

    // Unlinks and returns the earliest posted op with this tag; nullptr if none waits.
    T* take_first(Key key) {
        if (!indexed_) {
            auto it = find_linear(in_order_, key);
            if (it == in_order_.end()) return nullptr;
            T& op = *it;
            in_order_.erase(it);
            return &op;
        }
        Entry* entry = find_entry(key);
        if (entry == nullptr || entry->second.empty()) return nullptr;
        T& op = entry->second.front();
        erase_indexed(op, *entry);
        return &op;
    }

    // op must be in this queue.
    void erase(T& op) {
        if (!indexed_) {
            in_order_.erase(in_order_.iterator_to(op));
            return;
        }
        erase_indexed(op, *find_entry(op.*tag));
    }

    // Unlinks every op without touching them otherwise, and gives back the table's memory.
    void clear() {
        for (auto& [key, list] : lists_) list.clear();
        in_order_.clear();
        Lists().swap(lists_);
        spare_.clear();
        kept_empty_.clear();
        last_ = nullptr;
        indexed_ = false;
    }

private:
    // The earliest op of list with this tag, or list.end(); list: in_order_, const or not.
    template <class List>
    static auto find_linear(List& list, Key key) {
        auto it = list.begin();
        while (it != list.end() && (*it).*tag != key) ++it;
        return it;
    }

    // The entry of key's list, or nullptr. The entry found last is remembered: a ping-pong
    // beside many waiting receives posts and takes one tag over and over, and in a large
    // table the lookup's modulo by the bucket count is most of what matching costs. Entries
    // stay where they are when the table grows, so the pointer holds until that entry goes
    // (retire, clear).
    Entry* find_entry(Key key) {
        if (last_ != nullptr && last_->first == key) return last_;
        auto it = lists_.find(key);
        if (it == lists_.end()) return nullptr;
        last_ = &*it;
        return last_;
    }

    void erase_indexed(T& op, Entry& entry) {
        entry.second.erase(entry.second.iterator_to(op));
        in_order_.erase(in_order_.iterator_to(op));
        if (entry.second.empty()) keep_empty(entry.first);
        // Every tag's list is empty now: back to walking until the queue grows again.
        if (in_order_.empty()) indexed_ = false;
    }

    // A tag seen once is often seen again: a ping-pong posts and takes one tag over and over beside
    // the receives that wait, and a client's request tags come round. The lists emptied last stay
    // in the table, so posting on their tag again is one lookup, not an insert and an extract
    // (doc/perf/code-figures.md). Older ones give their nodes to spare_, so a new tag costs no
    // allocation either. Both are bounded: a queue that sees a new tag per message holds at most
    // max_kept empty lists and max_spare nodes.
    static constexpr std::size_t max_kept = 8;
    static constexpr std::size_t max_spare = 8;

    TagList& list_for(Key key) {
        if (Entry* entry = find_entry(key)) {
            if (entry->second.empty()) std::erase(kept_empty_, key);
            return entry->second;
        }
        if (spare_.empty()) {
            last_ = &*lists_.try_emplace(key).first;
        } else {
            auto node = std::move(spare_.back());
            spare_.pop_back();
            node.key() = key;
            last_ = &*lists_.insert(std::move(node)).position;
        }
        return last_->second;
    }

    // An emptied list stays in the table; the one emptied longest ago makes room.
    void keep_empty(Key key) {
        if (kept_empty_.size() == max_kept) {
            retire(lists_.find(kept_empty_.front()));
            kept_empty_.erase(kept_empty_.begin());
        }
        kept_empty_.push_back(key);
    }

    void retire(typename Lists::iterator it) {
        if (last_ == &*it) last_ = nullptr;
        if (spare_.size() < max_spare) {
            spare_.push_back(lists_.extract(it));
        } else {
            lists_.erase(it);
        }
    }

    Lists lists_;
    InOrder in_order_;
    bool indexed_ = false;
    std::vector<typename Lists::node_type> spare_;
    std::vector<Key> kept_empty_;  // tags whose lists are empty but kept, oldest first
    Entry* last_ = nullptr;        // the entry find_entry found last (see there)
};

}  // namespace bmi::support
