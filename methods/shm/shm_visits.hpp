// SPDX-License-Identifier: LGPL-2.1-or-later
// Which connections the next poll pass visits, and our doorbell that peers ring.
//
// Its own object because this is the whole rule that makes a pass cost what the active
// connections cost, however many idle ones we hold: a pass visits the connections whose bit
// of our doorbell a peer rang, the rings we watch (shm_watched.hpp), the busy ones (work of
// their own, Connection::needs_visit) and, when the sweep says so, every connection
// (doc/methods/shm.md, "Progress").
#pragma once

#include <cstdint>
#include <vector>

#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_doorbell.hpp"
#include "methods/shm/shm_watched.hpp"

namespace bmi::method::shm {

class ShmVisits {
public:
    // Creates our doorbell (the peers map it from the hello); 0 or -BMI_E*.
    int create() { return bell_.create(); }
    int bell_fd() const { return bell_.fd(); }

    // Gives conn an index of our doorbell; 0, or -BMI_EMFILE when all are in use.
    int take_bell_index(Connection& conn);
    void give_back_bell_index(Connection& conn);
    // conn is closing: its index, its watch and its place on the busy list go.
    void forget(Connection& conn);
    // The method is going: nothing is visited any more.
    void clear() { busy_.clear(); }

    // Puts conn on the busy list (visited by every pass) if it has work the peer will not
    // ring for; mark_busy puts it there for (at least) one visit whatever it holds.
    void note_work(Connection& conn) {
        if (conn.needs_visit()) mark_busy(conn);
    }
    void mark_busy(Connection& conn) {
        if (conn.busy) return;
        conn.busy = true;
        busy_.push_back(&conn);
    }
    // True if a ring was left unread for want of budget (such a connection is busy).
    bool any_stalled() const {
        for (const Connection* conn : busy_)
            if (conn->stalled) return true;
        return false;
    }

    // A new pass: queues the connections the doorbell rang, the watched rings that hold a
    // message and the busy ones (the busy list is emptied: note_work fills it again).
    void begin_pass() {
        ++pass_;
        visit_.clear();
        // The bits first: a peer publishing after we read its ring rings again
        // (shm_doorbell.hpp).
        bell_.take(bell_indices_.summary_words(), [&](std::uint32_t index) {
            // A bit nobody holds: a hostile peer's, or one rung just before a close.
            if (index < bell_owner_.size() && bell_owner_[index] != nullptr)
                queue(*bell_owner_[index]);
        });
        for (Connection* conn : watched_.connections())
            if (conn->rx.has_message()) queue(*conn);
        for (Connection* conn : busy_) {
            conn->busy = false;
            queue(*conn);
        }
        busy_.clear();
    }
    // Adds conn to this pass (once).
    void queue(Connection& conn) {
        if (conn.pass_mark == pass_) return;
        conn.pass_mark = pass_;
        visit_.push_back(&conn);
    }
    // This pass's connections; closing one during the pass leaves a dangling entry, so the
    // caller closes after the walk.
    const std::vector<Connection*>& due() const { return visit_; }
    // conn took messages from its ring in this pass: watch it, perhaps instead of another.
    void took_messages(Connection& conn) {
        if (Connection* replaced = watched_.took_messages(conn, pass_)) mark_busy(*replaced);
    }

    // A cheap look, for spinning: would a pass find work?
    bool anything_to_do() const {
        if (bell_.rung(bell_indices_.summary_words())) return true;
        if (watched_.any_message()) return true;
        for (const Connection* conn : busy_) {
            if (!conn->rings_live()) continue;
            if (conn->rx.has_message() || conn->has_local_work() || conn->waits_for_room() ||
                (!conn->splits.empty() && conn->split_finishable()))
                return true;
        }
        return false;
    }
    // Raises our doorbell's sleeping flag, then looks once more; true (and the flag
    // cleared) if there is work after all.
    bool sleep();
    // Clears the sleeping flag: the peers need not write our eventfd.
    void disarm() { bell_.wake(); }
    // Tells the peers which CPU we wait on (Doorbell::note_waiting_cpu).
    void note_waiting_cpu(int cpu) { bell_.note_waiting_cpu(cpu); }

private:
    Doorbell bell_;  // ours: peers ring it
    DoorbellIndices bell_indices_;
    std::vector<Connection*> bell_owner_;  // by doorbell index; nullptr: free
    std::vector<Connection*> busy_;        // work of their own (Connection::needs_visit)
    WatchedRings watched_;                 // rings we poll on every pass; their senders do not ring
    std::vector<Connection*> visit_;       // this pass's connections (a member: no allocation)
    std::uint64_t pass_ = 0;               // poll passes so far (Connection::pass_mark)
};

}  // namespace bmi::method::shm
