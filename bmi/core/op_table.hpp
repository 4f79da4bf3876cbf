// SPDX-License-Identifier: LGPL-2.1-or-later
// Operations between their post and the test call that reports them: their ids, the contexts
// with their completion queues, and the list of those still pending (which close_context and
// finalize cancel). Guarded by the instance's state lock. An Operation is freed only after it
// completed and was reported, so holding its method's lock (which blocks its completion) pins
// it; cancel relies on that.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "bmi/core/instance_types.hpp"
#include "methods/method.hpp"
#include "support/id_generator/id_generator.hpp"
#include "support/op_queue/op_queue.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

class OpTable {
public:
    static constexpr int max_contexts = 64;

    explicit OpTable(support::Mutex& state) : state_(state) {}
    // Frees what finalize left: completed ops nobody reported, and ops a method that broke
    // its contract kept pending.
    ~OpTable();
    OpTable(const OpTable&) = delete;
    OpTable& operator=(const OpTable&) = delete;

    void assert_held() const BMI_ASSERT_CAPABILITY(state_) { state_.assert_held(); }

    int open_context(bmi_context_id& out);
    bool context_valid(bmi_context_id context);
    // Closes the context and frees the completed ops nobody reported (its pending ones must be
    // cancelled first).
    void close_context(bmi_context_id context);
    bool context_valid_locked(bmi_context_id context) const BMI_REQUIRES(state_) {
        return context >= 0 && context < max_contexts &&
               contexts_[static_cast<std::size_t>(context)].open;
    }

    // Gives op an id and files it as pending; the id.
    // Inline, as the other per-message steps below: every posted receive takes them.
    bmi_op_id_t add_pending_locked(method::Operation& op) BMI_REQUIRES(state_) {
        op.id = ids_.insert(&op);
        pending_.push_back(op);
        return op.id;
    }
    // Gives a posted op its id: filed as pending, or queued at once if it completed during
    // the post; false if its context closed meanwhile (the id forgotten, the caller frees op).
    bool add_posted_locked(method::Operation& op) BMI_REQUIRES(state_);
    // Forgets a pending op whose post failed or completed at once.
    void remove_pending_locked(method::Operation& op) BMI_REQUIRES(state_) {
        pending_.erase(pending_.iterator_to(op));
        ids_.erase(op.id);
    }
    // The pending ops of method_index for which pick(op) is true.
    template <class Pick>
    std::vector<method::Operation*> pending_locked(int method_index, Pick&& pick)
        BMI_REQUIRES(state_) {
        std::vector<method::Operation*> found;
        for (auto& op : pending_)
            if (op.method_index == method_index && pick(op)) found.push_back(&op);
        return found;
    }
    method::Operation* find_locked(bmi_op_id_t id, bmi_context_id context) BMI_REQUIRES(state_);

    // Sink::complete: true if a waiter may want to know (the op was queued).
    bool complete(method::Operation& op, int error);

    // The op one test call of the calling thread waits for (Waiter::test). When that thread's
    // own progress completes it, complete() reaps it for the call on the spot: no queue, no
    // wake-up, and no second look under the state lock (the short path of a blocking
    // ping-pong, where the tester's sleep reads the reply). Per thread, so that any number of
    // threads may wait at once; `table` tells instances apart. Trivial, so that the
    // thread-local needs no initialisation call on first use (zeroed, it waits for nothing).
    struct Awaited {
        const OpTable* table;
        method::Operation* op;  // compared, never read, until complete() reaped it
        bmi_op_id_t id;
        bmi_context_id context;
        // The wait point's sequence read before op was filed: a test of this op may sleep on
        // it without first looking for op, since any other thread's completion of op moves it.
        std::uint64_t seen_before_post;
        bool waiting;  // a test call of this thread waits for op now
        bool reaped;   // complete() took op out of the table for that call
    };
    // The receive this thread just posted, for a test call of it that may follow.
    void note_posted_locked(method::Operation& op, std::uint64_t seen) BMI_REQUIRES(state_) {
        awaited_ = {this, &op, op.id, op.context, seen, false, false};
    }
    // The calling thread's test call now waits for op (pending, with its id).
    void await_locked(method::Operation& op) BMI_REQUIRES(state_) {
        awaited_ = {this, &op, op.id, op.context, 0, true, false};
    }
    // A test call of (id, context) starts: if this thread posted that receive last, it waits
    // for it from now on and the sequence read before the post is returned (no look needed).
    std::optional<std::uint64_t> await_posted(bmi_op_id_t id, bmi_context_id context) const {
        if (awaited_.table != this || awaited_.id != id || awaited_.context != context || id == 0)
            return std::nullopt;
        awaited_.waiting = true;
        return awaited_.seen_before_post;
    }
    // What the calling thread's test call may return at once: an op complete() reaped for it,
    // or nullptr. Needs no lock: only this thread sets `reaped`.
    method::Operation* reaped_for_caller() const {
        return awaited_.reaped && awaited_.table == this ? awaited_.op : nullptr;
    }
    // The calling thread's test call ended.
    static void end_wait() { awaited_ = {}; }

    // Puts a completed op on its context's queue; false (and its id forgotten) if the context
    // was closed meanwhile, so the caller frees it.
    bool queue_completed_locked(method::Operation& op) BMI_REQUIRES(state_);
    // Removes a completed op from its context; the caller frees it after the lock.
    Completion reap_locked(method::Operation& op) BMI_REQUIRES(state_);
    // What a test call reports of a completed op.
    static Completion completion_of(const method::Operation& op) {
        return Completion{op.id, op.error, op.actual_size, op.user_ptr};
    }
    // Reaps the context's completed ops into out (from outcount on) and done.
    void reap_context_locked(bmi_context_id context, std::span<Completion> out, int& outcount,
                             std::vector<method::Operation*>& done) BMI_REQUIRES(state_);
    static void free_op(method::Operation* op);

private:
    // initial-exec: a fixed offset from the thread pointer, no __tls_get_addr call.
    __attribute__((tls_model("initial-exec"))) static thread_local Awaited awaited_;

    using Queue =
        support::OpQueue<method::Operation, method::SafeHook, &method::Operation::core_hook>;
    struct Context {
        bool open = false;
        Queue completed;
    };

    support::Mutex& state_;  // the instance's state lock
    support::IdGenerator ids_ BMI_GUARDED_BY(state_);
    std::array<Context, max_contexts> contexts_ BMI_GUARDED_BY(state_);
    // Every posted op that has not completed, linked through core_hook (it moves to its
    // context's completed queue on completion).
    Queue pending_ BMI_GUARDED_BY(state_);
};

}  // namespace bmi::core
