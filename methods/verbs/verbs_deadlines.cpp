// SPDX-License-Identifier: LGPL-2.1-or-later
// No wait on a live peer lasts without a deadline (issue 37; tcp's bounds, by the same names):
// - send (BMI_VERBS_SEND_TIMEOUT_MS): messages wait for credits a peer does not return (a
//   stopped or hung process: its device still acknowledges, so the RC retries never fail);
//   the connection fails with -BMI_ETIMEDOUT, and every operation on it;
// - rendezvous (BMI_VERBS_RENDEZVOUS_TIMEOUT_MS): an RTS whose FIN does not come. The sender
//   cannot see the receiver's READs (its device serves them without its process), so a
//   transfer the receiver started and stopped and one it never started look alike: both end
//   here. The send fails as a cancel does: the receiver is asked to drop the RTS, and the
//   registration stays until its FIN or the connection's end.
// The send deadline is a kit::ProgressDeadline started when a pump leaves messages waiting
// for credits; its wake-ups look at the credits returned, no clock read while credits flow.
#include "methods/verbs/verbs_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::verbs {

void VerbsMethod::watch_credits(Connection& c) {
    if (!c.send_clock.timed && c.waits_for_credits())
        c.send_clock.start(timers_, {c.id, kit::DeadlineKind::send}, c.credits_back,
                           timeouts_.send);
}

void VerbsMethod::watch_rts(Connection& c, SendTransfer& t) {
    t.deadline = std::chrono::steady_clock::now() + timeouts_.rendezvous;
    timers_.schedule_by({c.id, kit::DeadlineKind::rendezvous}, t.deadline);
}

void VerbsMethod::on_peer_deadline(kit::DeadlineKey key,
                                   std::chrono::steady_clock::time_point now) {
    auto it = connections_.find(key.id);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.state != Connection::State::ready) return;  // failed: its operations with it
    if (key.kind == kit::DeadlineKind::send) {
        if (!c.send_clock.expired_if_owed(c.waits_for_credits(), timers_, key, c.credits_back, now,
                                          timeouts_.send))
            return;
        BMI_LOG(error,
                "verbs: connection %llu returned no credit in %lld ms "
                "(BMI_VERBS_SEND_TIMEOUT_MS); its operations fail",
                static_cast<unsigned long long>(c.id),
                static_cast<long long>(timeouts_.send.count()));
        fail_connection(c, -BMI_ETIMEDOUT);
        return;
    }
    if (key.kind != kit::DeadlineKind::rendezvous) return;
    const auto due =
        kit::take_due(timers_, key, now, sends_, [&c](const std::unique_ptr<SendTransfer>& t) {
            return t->connection == &c && t->op != nullptr
                       ? t->deadline
                       : std::chrono::steady_clock::time_point{};
        });
    for (std::uint64_t cookie : due) {
        SendTransfer& t = *sends_.at(cookie);
        Operation& op = *t.op;
        t.op = nullptr;
        BMI_LOG(error,
                "verbs: connection %llu sent no FIN for an RTS in %lld ms "
                "(BMI_VERBS_RENDEZVOUS_TIMEOUT_MS); the send fails",
                static_cast<unsigned long long>(c.id),
                static_cast<long long>(timeouts_.rendezvous.count()));
        queue_control(c, MsgType::cancel, cookie, FinStatus::cancelled);
        ops_.finish(op, -BMI_ETIMEDOUT);
    }
}

}  // namespace bmi::method::verbs
