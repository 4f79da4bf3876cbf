// SPDX-License-Identifier: LGPL-2.1-or-later
// No wait on a live peer lasts without a deadline (issue 37; tcp's three bounds, by the same
// names and meanings):
// - send (BMI_SHM_SEND_TIMEOUT_MS): messages wait for room in a ring the peer frees no slot of
//   (a stopped or hung process, or one that stopped reading us);
// - rendezvous (BMI_SHM_RENDEZVOUS_TIMEOUT_MS): an RTS that is neither answered (CTS, HELP)
//   nor finished (DONE, NAK); a single copy by the receiver answers only with its DONE;
// - stall (BMI_SHM_STALL_TIMEOUT_MS): a transfer the peer started and does not go on with: DATA
//   owed after our CTS, its share of a split copy we receive, the DONE of one we send.
// Each ends by closing the connection with -BMI_ETIMEDOUT: an RTS names our buffer and a HELP
// the peer's, so only a closed connection ends what the peer may still do with them.
//
// The send and stall deadlines are kit::ProgressDeadlines: started when such a wait begins (at
// the end of a visit, no clock read while nothing waits), they look at a progress count only
// at their wake-ups: the ring's tail for send; for stall, the visits that took messages from
// the peer and the split counters both processes move.
#include "methods/shm/shm_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

std::uint64_t ShmMethod::transfer_progress(const Connection& conn) const {
    std::uint64_t count = conn.receipts;
    for (const SplitReceive& split : conn.splits) {
        const SplitBoardEntry& entry = conn.own_board[split.entry];
        count += entry.claims.load(std::memory_order_relaxed) +
                 entry.pushed.load(std::memory_order_relaxed);
    }
    // The receiver's claims on the split copies it asked us to help with (its own copying).
    if (conn.helped != 0)
        for (const auto& [cookie, op] : conn.sends)
            if (const std::uint32_t entry = ShmOpBook::slots(*op).board_entry; entry != 0)
                count += conn.peer_board[entry - 1].claims.load(std::memory_order_relaxed);
    return count;
}

void ShmMethod::start_peer_clocks(Connection& conn) {
    if (!conn.send_clock.timed && conn.waits_for_room())
        conn.send_clock.start(timers_, {conn.id, kit::DeadlineKind::send}, conn.tx.peer_consumed(),
                              options_.send_timeout);
    if (!conn.stall_clock.timed && conn.owes_transfer())
        conn.stall_clock.start(timers_, {conn.id, kit::DeadlineKind::stall},
                               transfer_progress(conn), options_.stall_timeout);
}

void ShmMethod::announced(Connection& conn, Operation& op) {
    const auto at = std::chrono::steady_clock::now() + options_.rendezvous_timeout;
    ShmOpBook::slots(op).rts_deadline = at;
    timers_.schedule_by({conn.id, kit::DeadlineKind::rendezvous}, at);
}

void ShmMethod::answered(Connection& conn, Operation& op, bool helps) {
    ShmOpBook::Slots& slots = ShmOpBook::slots(op);
    slots.rts_deadline = {};
    if (helps) {
        if (slots.board_entry == 0) ++conn.helped;
        return;
    }
    if (slots.board_entry != 0) --conn.helped;
    slots.board_entry = 0;
}

void ShmMethod::on_peer_deadline(Connection& conn, kit::DeadlineKey key,
                                 std::chrono::steady_clock::time_point now) {
    const char* what = nullptr;
    long long limit = 0;
    switch (key.kind) {
        case kit::DeadlineKind::send:
            if (!conn.send_clock.expired_if_owed(conn.waits_for_room(), timers_, key,
                                                 conn.tx.peer_consumed(), now,
                                                 options_.send_timeout))
                return;
            what = "freed no slot of its full ring";
            limit = options_.send_timeout.count();
            break;
        case kit::DeadlineKind::stall:
            // Messages the peer published and we did not read yet are its progress: a process
            // of ours that did not call progress for a while must not read as a stalled peer.
            if (!conn.stall_clock.expired_if_owed(
                    conn.owes_transfer(), [&] { return conn.rx.has_message(); }, timers_, key,
                    transfer_progress(conn), now, options_.stall_timeout))
                return;
            what = "did not go on with a transfer it started";
            limit = options_.stall_timeout.count();
            break;
        case kit::DeadlineKind::rendezvous:
            if (kit::take_due(timers_, key, now, conn.sends, [](Operation* op) {
                    return ShmOpBook::slots(*op).rts_deadline;
                }).empty())
                return;
            what = "answered no RTS of ours";
            limit = options_.rendezvous_timeout.count();
            break;
        default:
            return;
    }
    BMI_LOG(error, "shm: pid %d %s in %lld ms; closing connection %llu, its operations fail",
            static_cast<int>(conn.peer_pid), what, limit, static_cast<unsigned long long>(conn.id));
    close_connection(conn, -BMI_ETIMEDOUT);
}

}  // namespace bmi::method::shm
