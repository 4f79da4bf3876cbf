// SPDX-License-Identifier: LGPL-2.1-or-later
// Our queue pairs and the connection each belongs to: by QP number, for work completions,
// and by address, for the device's asynchronous events.
//
// Its own object because both indexes change together, and because an event's QP pointer is
// only ever compared with ours here, never followed (it may name a QP destroyed since).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "methods/verbs/verbs_connection.hpp"

namespace bmi::method::verbs {

class VerbsQueuePairs {
public:
    // c's queue pair exists (c.qp): completions and events for it now find c.
    void add(Connection& c) {
        by_number_[c.qp->qp_num] = &c;
        by_address_[c.qp] = &c;
    }
    // c's queue pair is about to be destroyed.
    void remove(const Connection& c) {
        by_number_.erase(c.qp->qp_num);
        by_address_.erase(c.qp);
    }
    std::size_t size() const { return by_number_.size(); }
    // The connection of a completion's queue pair, or nullptr.
    Connection* by_number(std::uint32_t qp_num) const {
        const auto found = by_number_.find(qp_num);
        return found == by_number_.end() ? nullptr : found->second;
    }
    // The connection of an event's queue pair, or nullptr if the pointer names none of ours.
    Connection* by_address(const ibv_qp* qp) const {
        const auto found = by_address_.find(qp);
        return found == by_address_.end() ? nullptr : found->second;
    }

private:
    std::unordered_map<std::uint32_t, Connection*> by_number_;
    std::unordered_map<const ibv_qp*, Connection*> by_address_;
};

}  // namespace bmi::method::verbs
