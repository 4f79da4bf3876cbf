// SPDX-License-Identifier: LGPL-2.1-or-later
// The connections whose incoming ring we poll directly, so their senders skip our doorbell.
//
// Ringing the doorbell costs a sender two atomic read-modify-writes on lines we last wrote
// (the connection's bit word and its summary word), and costs us their transfers back when we
// take them: three cache-line transfers per message where the ring alone needs one (the line
// with the stamp). A ping-pong paid that on every message. So a connection that brings
// messages is watched: we look at its next stamp on every pass, as we would at the summary
// words, and its ring's control block says so (RingControl::consumer_watches). Its sender
// then publishes, fences, sees the flag and rings nothing; it still writes our eventfd when
// our doorbell says we sleep (before sleeping we look at the watched rings after raising the
// flag: the same store / fence / load pattern as the doorbell's).
//
// The set is small (capacity), so a pass costs a few loads of lines that stay in our cache
// until a sender writes them. When it is full, a connection that brings messages replaces the
// one quiet for longest, if that one has been quiet for quiet_passes; the replaced one is
// told to ring again, and a message it published meanwhile is visited (stop_watching).
//
// The flag is in memory the peer maps, so the peer can set it: then it rings nothing, and its
// own messages wait for the sweep (shm_progress.cpp). It cannot delay anyone else's, and we
// never read the flag ourselves.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "methods/shm/shm_connection.hpp"

namespace bmi::method::shm {

class WatchedRings {
public:
    static constexpr std::uint32_t capacity = 8;
    static constexpr std::uint64_t quiet_passes = 64;

    // conn took messages in poll pass `pass`: watch it if there is room, or a connection quiet
    // long enough to replace. Returns the replaced connection if its ring holds a message its
    // sender may not have rung for (visit it), else nullptr.
    Connection* took_messages(Connection& conn, std::uint64_t pass);
    // conn is closing: forget it without touching its segment.
    void forget(Connection& conn);

    std::span<Connection* const> connections() const { return {watched_.data(), count_}; }
    // A cheap look, for spinning: does a watched ring hold a message not held back by quota?
    bool any_message() const {
        for (std::uint32_t i = 0; i < count_; ++i)
            if (watched_[i]->rx.has_message() && !watched_[i]->stalled) return true;
        return false;
    }

private:
    void remove_at(std::uint32_t index);

    std::array<Connection*, capacity> watched_{};
    std::uint32_t count_ = 0;
};

}  // namespace bmi::method::shm
