// SPDX-License-Identifier: LGPL-2.1-or-later
// Which connections we watch (shm_watched.hpp).
#include "methods/shm/shm_watched.hpp"

namespace bmi::method::shm {

Connection* WatchedRings::took_messages(Connection& conn, std::uint64_t pass) {
    conn.last_traffic_pass = pass;
    if (conn.watched) return nullptr;
    Connection* replaced = nullptr;
    if (count_ == capacity) {
        std::uint32_t quietest = 0;
        for (std::uint32_t i = 1; i < count_; ++i)
            if (watched_[i]->last_traffic_pass < watched_[quietest]->last_traffic_pass)
                quietest = i;
        Connection& old = *watched_[quietest];
        if (pass - old.last_traffic_pass < quiet_passes) return nullptr;
        remove_at(quietest);
        old.watched = false;
        if (old.rx.stop_watching()) replaced = &old;
    }
    watched_[count_++] = &conn;
    conn.watched = true;
    conn.rx.start_watching();
    return replaced;
}

void WatchedRings::forget(Connection& conn) {
    if (!conn.watched) return;
    conn.watched = false;
    for (std::uint32_t i = 0; i < count_; ++i)
        if (watched_[i] == &conn) {
            remove_at(i);
            return;
        }
}

void WatchedRings::remove_at(std::uint32_t index) {
    watched_[index] = watched_[--count_];
    watched_[count_] = nullptr;
}

}  // namespace bmi::method::shm
