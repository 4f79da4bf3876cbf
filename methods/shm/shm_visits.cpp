// SPDX-License-Identifier: LGPL-2.1-or-later
// Which connections a poll pass visits (shm_visits.hpp): doorbell indices and sleeping.
#include "methods/shm/shm_visits.hpp"

#include <algorithm>
#include <atomic>

#include "methods/shm/shm_checks.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

int ShmVisits::take_bell_index(Connection& conn) {
    long index = bell_indices_.take();
    if (index < 0) {
        BMI_LOG(error, "shm: %u connections at once, the most one instance can hold",
                doorbell_capacity);
        return -BMI_EMFILE;
    }
    auto i = static_cast<std::size_t>(index);
    if (i >= bell_owner_.size()) bell_owner_.resize(i + 1, nullptr);
    bell_owner_[i] = &conn;
    conn.bell_index = index;
    return 0;
}

void ShmVisits::give_back_bell_index(Connection& conn) {
    if (conn.bell_index < 0) return;
    bell_owner_[static_cast<std::size_t>(conn.bell_index)] = nullptr;
    bell_indices_.give_back(static_cast<std::uint32_t>(conn.bell_index));
    conn.bell_index = -1;
}

void ShmVisits::forget(Connection& conn) {
    give_back_bell_index(conn);
    watched_.forget(conn);
    if (conn.busy) std::erase(busy_, &conn);
    conn.busy = false;
}

bool ShmVisits::sleep() {
    bool work = bell_.sleep(bell_indices_.summary_words());
    // A sender to a ring we watch looks at the sleeping flag instead of ringing
    // (shm_watched.hpp): after the flag, look at those rings once more.
    full_fence();
    if (watched_.any_message()) work = true;
    for (Connection* conn : busy_) {
        if (!conn->rings_live()) continue;
        // After the flag, like a ring: a sender finishing its split share rings us only if it
        // wrote its counter before it saw the flag, so look at its counter once more.
        if ((conn->rx.has_message() && !conn->stalled) || conn->has_local_work() ||
            conn->split_finishable())
            work = true;
    }
    // Awake after all: the peers need not write our eventfd.
    if (work) disarm();
    return work;
}

}  // namespace bmi::method::shm
