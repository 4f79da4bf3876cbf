// SPDX-License-Identifier: LGPL-2.1-or-later
// The operations an shm instance holds, and where each sits.
//
// Its own object because every completion of every concern (rings, copies, closing) passes
// here, and the counts of held and of moving operations are what before_sleep spins on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "methods/operation.hpp"
#include "methods/shm/shm_peer.hpp"
#include "methods/sink.hpp"

namespace bmi::method::shm {

// Where a pending operation sits, so cancel knows what to unlink; kept in the operation's
// method_state (0: not pending here) with the connection in its slots.
enum class Place : std::uint8_t {
    posted_recv = 1,  // on its peer's posted_recvs; nothing moved yet
    queued_send,      // on a connection's send_queue; nothing moved yet
    in_flight,        // announced (RTS) or partly moved: cancelling closes the connection
};

class ShmOpBook {
public:
    // What shm keeps in each pending operation (method_slots).
    struct Slots {
        std::uint64_t connection = 0;  // the id of the connection it is queued or moving on
        std::uint64_t cookie = 0;      // its RTS transfer
        // A send whose RTS is out: when it fails unanswered (time_point{}: answered).
        std::chrono::steady_clock::time_point rts_deadline{};
        // A send the receiver split: 1 + its entry on the receiver's board (0: none).
        std::uint32_t board_entry = 0;
    };
    static Slots& slots(Operation& op) { return method_slots<Slots>(op); }

    explicit ShmOpBook(Sink& sink) : sink_(sink) {}

    void place(Operation& op, Place where, std::uint64_t connection) {
        if (op.method_state == 0) {
            ++pending_;
            slots(op) = Slots{};
        }
        moving_ -= op.method_state == static_cast<std::uint8_t>(Place::in_flight);
        moving_ += where == Place::in_flight;
        op.method_state = static_cast<std::uint8_t>(where);
        slots(op).connection = connection;
    }
    void unplace(Operation& op) {
        if (op.method_state != 0) --pending_;
        moving_ -= op.method_state == static_cast<std::uint8_t>(Place::in_flight);
        op.method_state = 0;
    }
    // Hands op back to the control layer with error (0: success).
    void finish(Operation& op, int error) {
        unplace(op);
        sink_.complete(op, error);
    }
    // Every receive still waiting for peer's messages ends with error.
    void fail_posted_recvs(ShmPeer& peer, int error);
    // Operations with a method_state.
    std::size_t pending() const { return pending_; }
    // Of those, the ones in flight: large messages announced or moving.
    std::size_t moving() const { return moving_; }

private:
    Sink& sink_;
    std::size_t pending_ = 0;
    std::size_t moving_ = 0;
};

}  // namespace bmi::method::shm
