// SPDX-License-Identifier: LGPL-2.1-or-later
// Op ids, contexts and completion; see the header.
#include "bmi/core/op_table.hpp"

#include <cstdlib>

#include "bmi/core/list_io_emulation.hpp"
#include "bmi/core/op_cache.hpp"

namespace bmi::core {

thread_local OpTable::Awaited OpTable::awaited_;

OpTable::~OpTable() {
    std::vector<method::Operation*> leftovers;
    for (auto& context : contexts_) {
        while (!context.completed.empty()) {
            leftovers.push_back(&context.completed.front());
            context.completed.pop_front();
        }
    }
    while (!pending_.empty()) {
        leftovers.push_back(&pending_.front());
        pending_.pop_front();
    }
    for (auto* op : leftovers) free_op(op);
}

int OpTable::open_context(bmi_context_id& out) {
    support::MutexLock lock(state_);
    for (int i = 0; i < max_contexts; ++i) {
        if (contexts_[static_cast<std::size_t>(i)].open) continue;
        contexts_[static_cast<std::size_t>(i)].open = true;
        out = i;
        return 0;
    }
    return -BMI_EBUSY;
}

bool OpTable::context_valid(bmi_context_id context) {
    support::MutexLock lock(state_);
    return context_valid_locked(context);
}

void OpTable::close_context(bmi_context_id context) {
    std::vector<method::Operation*> done;
    {
        support::MutexLock lock(state_);
        auto& queue = contexts_[static_cast<std::size_t>(context)].completed;
        while (!queue.empty()) {
            auto& op = queue.front();
            queue.pop_front();
            ids_.erase(op.id);
            done.push_back(&op);
        }
        contexts_[static_cast<std::size_t>(context)].open = false;
    }
    for (auto* op : done) free_op(op);
}

bool OpTable::add_posted_locked(method::Operation& op) {
    op.id = ids_.insert(&op);
    if (!op.completed) {
        pending_.push_back(op);
        return true;
    }
    return queue_completed_locked(op);
}

method::Operation* OpTable::find_locked(bmi_op_id_t id, bmi_context_id context) {
    auto* op = static_cast<method::Operation*>(ids_.find(id));
    if (op == nullptr || op->context != context) return nullptr;
    return op;
}

bool OpTable::complete(method::Operation& op, int error) {
    // A failed operation moved no message the caller may use, whatever the method counted.
    if (error != 0) op.actual_size = 0;
    if (error == 0 && op.bounce != nullptr && op.kind == method::OpKind::recv)
        unpack_list(op.bounce, op.actual_size, op.user_list, op.user_sizes, op.user_count);
    bool orphan;
    {
        support::MutexLock lock(state_);
        if (op.completed) return false;  // a method reporting twice must not corrupt the queues
        op.error = error;
        op.completed = true;
        if (op.id == 0) return false;  // still inside post(), which queues it
        if (op.core_hook.is_linked()) pending_.erase(pending_.iterator_to(op));
        // The id as well as the address: a recycled Operation at the same address is another
        // op, with another id.
        if (awaited_.op == &op && awaited_.waiting && awaited_.id == op.id &&
            awaited_.table == this) {
            ids_.erase(op.id);
            awaited_.reaped = true;
            return false;  // the waiter is this thread, awake
        }
        orphan = !queue_completed_locked(op);
    }
    if (orphan) {
        free_op(&op);
        return false;
    }
    return true;
}

bool OpTable::queue_completed_locked(method::Operation& op) {
    auto& context = contexts_[static_cast<std::size_t>(op.context)];
    if (!context.open) {
        ids_.erase(op.id);
        return false;
    }
    context.completed.push_back(op);
    return true;
}

Completion OpTable::reap_locked(method::Operation& op) {
    auto& context = contexts_[static_cast<std::size_t>(op.context)];
    context.completed.erase(context.completed.iterator_to(op));
    ids_.erase(op.id);
    return completion_of(op);
}

void OpTable::reap_context_locked(bmi_context_id context, std::span<Completion> out, int& outcount,
                                  std::vector<method::Operation*>& done) {
    auto& queue = contexts_[static_cast<std::size_t>(context)].completed;
    while (!queue.empty() && static_cast<std::size_t>(outcount) < out.size()) {
        method::Operation& op = queue.front();
        out[static_cast<std::size_t>(outcount++)] = reap_locked(op);
        done.push_back(&op);
    }
}

void OpTable::free_op(method::Operation* op) {
    if (op->bounce != nullptr) std::free(op->bounce);  // only list emulation has one
    OpCache::give(op);
}

}  // namespace bmi::core
