// SPDX-License-Identifier: LGPL-2.1-or-later
// Operations between their post and the test call that reports them: their ids, the contexts
// with their completion queues, and the list of those still pending (which close_context and
// finalize cancel). Guarded by the instance's state lock. An Operation is freed only after it
// completed and was reported, so holding its method's lock (which blocks its completion) pins
// it; cancel relies on that.
#pragma once

#include <array>
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
    // Puts a completed op on its context's queue; false (and its id forgotten) if the context
    // was closed meanwhile, so the caller frees it.
    bool queue_completed_locked(method::Operation& op) BMI_REQUIRES(state_);
    // Removes a completed op from its context; the caller frees it after the lock.
    Completion reap_locked(method::Operation& op) BMI_REQUIRES(state_);
    // Reaps the context's completed ops into out (from outcount on) and done.
    void reap_context_locked(bmi_context_id context, std::span<Completion> out, int& outcount,
                             std::vector<method::Operation*>& done) BMI_REQUIRES(state_);
    static void free_op(method::Operation* op);

private:
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
