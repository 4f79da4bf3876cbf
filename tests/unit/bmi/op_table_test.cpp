// SPDX-License-Identifier: LGPL-2.1-or-later
// The op table on its own: contexts, op ids, completion into a context's queue, and ops that
// complete while posting or after their context closed.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>
#include <vector>

#include "bmi/core/op_cache.hpp"
#include "bmi/core/op_table.hpp"

using namespace bmi;

namespace {
method::Operation* new_op(bmi_context_id context) {
    method::Operation* op = core::OpCache::take();
    op->context = context;
    op->user_ptr = op;
    return op;
}

// An op table with its state lock, and the locked steps the tests take one at a time.
struct Table {
    support::Mutex state;
    core::OpTable ops{state};

    bmi_op_id_t add_pending(method::Operation* op) {
        support::MutexLock lock(state);
        ops.assert_held();
        return ops.add_pending_locked(*op);
    }
    void await(method::Operation* op) {
        support::MutexLock lock(state);
        ops.assert_held();
        ops.await_locked(*op);
    }
    void note_posted(method::Operation* op, std::uint64_t seen) {
        support::MutexLock lock(state);
        ops.assert_held();
        ops.note_posted_locked(*op, seen);
    }
    int queued(bmi_context_id context) {
        std::vector<core::Completion> out(4);
        std::vector<method::Operation*> done;
        int outcount = 0;
        {
            support::MutexLock lock(state);
            ops.assert_held();
            ops.reap_context_locked(context, out, outcount, done);
        }
        for (auto* op : done) core::OpTable::free_op(op);
        return outcount;
    }
    method::Operation* find(bmi_op_id_t id, bmi_context_id context) {
        support::MutexLock lock(state);
        ops.assert_held();
        return ops.find_locked(id, context);
    }
};

// A pending op in a fresh table's first context, which this thread's test call awaits.
struct AwaitedOp {
    Table table;
    bmi_context_id context = -1;
    method::Operation* op = nullptr;
    bmi_op_id_t id = 0;
    AwaitedOp() {
        REQUIRE(table.ops.open_context(context) == 0);
        op = new_op(context);
        id = table.add_pending(op);
        table.await(op);
    }
};
}  // namespace

TEST_CASE("op table: contexts are handed out until none is left") {
    Table table;
    core::OpTable& ops = table.ops;
    std::vector<bmi_context_id> ids;
    for (int i = 0; i < core::OpTable::max_contexts; ++i) {
        bmi_context_id id = -1;
        REQUIRE(ops.open_context(id) == 0);
        ids.push_back(id);
    }
    bmi_context_id more = -1;
    CHECK(ops.open_context(more) == -BMI_EBUSY);
    CHECK(ops.context_valid(ids[3]));
    ops.close_context(ids[3]);
    CHECK_FALSE(ops.context_valid(ids[3]));
    CHECK_FALSE(ops.context_valid(-1));
    CHECK_FALSE(ops.context_valid(core::OpTable::max_contexts));
    REQUIRE(ops.open_context(more) == 0);
    CHECK(more == ids[3]);
}

TEST_CASE("op table: a pending op completes into its context's queue") {
    Table table;
    core::OpTable& ops = table.ops;
    bmi_context_id context = -1, other = -1;
    REQUIRE(ops.open_context(context) == 0);
    REQUIRE(ops.open_context(other) == 0);
    method::Operation* op = new_op(context);
    const bmi_op_id_t id = table.add_pending(op);
    CHECK(id != 0);
    CHECK(table.find(id, context) == op);
    CHECK(table.find(id, other) == nullptr);  // an id is tested in its own context
    op->actual_size = 99;
    CHECK(ops.complete(*op, -BMI_ECANCEL));
    CHECK_FALSE(ops.complete(*op, 0));  // a second report changes nothing
    std::vector<core::Completion> out(2);
    std::vector<method::Operation*> done;
    int outcount = 0;
    {
        support::MutexLock lock(table.state);
        ops.assert_held();
        ops.reap_context_locked(context, out, outcount, done);
    }
    CHECK(table.find(id, context) == nullptr);
    REQUIRE(outcount == 1);
    CHECK(out[0].id == id);
    CHECK(out[0].error == -BMI_ECANCEL);
    CHECK(out[0].actual_size == 0);  // a failed op moved nothing the caller may use
    CHECK(out[0].user_ptr == op);
    for (auto* finished : done) core::OpTable::free_op(finished);
}

TEST_CASE("op table: an op completing during its post is queued by the post") {
    Table table;
    core::OpTable& ops = table.ops;
    bmi_context_id context = -1;
    REQUIRE(ops.open_context(context) == 0);
    method::Operation* op = new_op(context);
    CHECK_FALSE(ops.complete(*op, 0));  // no id yet: post() files it
    support::MutexLock lock(table.state);
    ops.assert_held();
    REQUIRE(ops.add_posted_locked(*op));
    method::Operation* found = ops.find_locked(op->id, context);
    REQUIRE(found == op);
    CHECK(found->completed);
    core::Completion reaped = ops.reap_locked(*found);
    CHECK(reaped.id == op->id);
    core::OpTable::free_op(found);
}

TEST_CASE("op table: an op whose context closed is freed when it completes") {
    Table table;
    bmi_context_id context = -1;
    REQUIRE(table.ops.open_context(context) == 0);
    method::Operation* op = new_op(context);
    const bmi_op_id_t id = table.add_pending(op);
    table.ops.close_context(context);
    CHECK_FALSE(table.ops.complete(*op, 0));  // freed: nobody can test it any more
    CHECK(table.find(id, context) == nullptr);
}

TEST_CASE("op table: what finalize leaves is freed with the table") {
    auto table = std::make_unique<Table>();
    bmi_context_id context = -1;
    REQUIRE(table->ops.open_context(context) == 0);
    method::Operation* pending = new_op(context);
    method::Operation* completed = new_op(context);
    table->add_pending(pending);
    table->add_pending(completed);
    CHECK(table->ops.complete(*completed, 0));
    table.reset();  // ASan reports a leak if either op stays behind
}

TEST_CASE("op table: an op its thread's test call awaits is handed to that call, not queued") {
    AwaitedOp awaited;
    auto& [table, context, op, id] = awaited;
    CHECK(table.ops.reaped_for_caller() == nullptr);
    CHECK_FALSE(table.ops.complete(*op, 0));  // nobody to wake: the waiter is this thread
    CHECK(table.ops.reaped_for_caller() == op);
    CHECK(table.find(id, context) == nullptr);  // reaped: the id is gone
    CHECK(table.queued(context) == 0);
    core::OpTable::end_wait();
    CHECK(table.ops.reaped_for_caller() == nullptr);
    core::OpTable::free_op(op);
}

TEST_CASE("op table: another thread's completion of the awaited op is queued with a wake-up") {
    AwaitedOp awaited;
    auto& [table, context, op, id] = awaited;
    bool woke = false;
    std::thread([&] { woke = table.ops.complete(*op, 0); }).join();
    CHECK(woke);
    CHECK(table.ops.reaped_for_caller() == nullptr);
    CHECK(table.find(id, context) == op);
    CHECK(table.queued(context) == 1);
    core::OpTable::end_wait();
}

TEST_CASE("op table: an op at the awaited address but with another id is queued") {
    AwaitedOp awaited;
    auto& [table, context, op, id] = awaited;
    {
        // The op is forgotten and filed again: the same memory, a new id (as a recycled one).
        support::MutexLock lock(table.state);
        table.ops.assert_held();
        table.ops.remove_pending_locked(*op);
    }
    table.add_pending(op);
    CHECK(table.ops.complete(*op, 0));
    CHECK(table.ops.reaped_for_caller() == nullptr);
    CHECK(table.queued(context) == 1);
    core::OpTable::end_wait();
}

TEST_CASE("op table: a test call takes over only the receive its thread posted last") {
    Table table, other_table;
    bmi_context_id context = -1, other = -1;
    REQUIRE(table.ops.open_context(context) == 0);
    REQUIRE(table.ops.open_context(other) == 0);
    method::Operation* op = new_op(context);
    const bmi_op_id_t id = table.add_pending(op);
    table.note_posted(op, 42);
    CHECK_FALSE(table.ops.await_posted(id + 1, context).has_value());
    CHECK_FALSE(table.ops.await_posted(id, other).has_value());
    CHECK_FALSE(other_table.ops.await_posted(id, context).has_value());
    CHECK_FALSE(table.ops.await_posted(0, context).has_value());
    SECTION("completed before the test call: queued, with a wake-up") {
        CHECK(table.ops.complete(*op, 0));
        CHECK(table.queued(context) == 1);
    }
    SECTION("completed during the test call: handed over") {
        const auto seen = table.ops.await_posted(id, context);
        REQUIRE(seen.has_value());
        CHECK(*seen == 42);  // the sequence read before the post
        CHECK_FALSE(table.ops.complete(*op, 0));
        CHECK(table.ops.reaped_for_caller() == op);
        CHECK(table.queued(context) == 0);
        core::OpTable::free_op(op);
    }
    core::OpTable::end_wait();
}
