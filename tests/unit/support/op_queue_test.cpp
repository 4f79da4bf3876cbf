// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for OpQueue: FIFO order, O(1) unlink from the middle, hook state, no ownership.
#include "support/op_queue/op_queue.hpp"

#include <boost/intrusive/list_hook.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <vector>

namespace {

using SafeHook =
    boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

struct Op {
    int value = 0;
    SafeHook hook;
};

using Queue = bmi::support::OpQueue<Op, SafeHook, &Op::hook>;

std::vector<int> values_of(const Queue& queue) {
    std::vector<int> out;
    for (const Op& op : queue) out.push_back(op.value);
    return out;
}

}  // namespace

TEST_CASE("pops in the order pushed", "[op_queue]") {
    std::array<Op, 5> ops{};  // stack objects: the queue never allocates or owns them
    Queue queue;
    CHECK(queue.empty());
    for (int i = 0; i < 5; ++i) {
        ops[i].value = i;
        queue.push_back(ops[i]);
    }
    CHECK(queue.size() == 5);
    CHECK(values_of(queue) == std::vector<int>{0, 1, 2, 3, 4});

    for (int expected = 0; expected < 5; ++expected) {
        REQUIRE_FALSE(queue.empty());
        Op& front = queue.front();
        CHECK(front.value == expected);
        CHECK(&front == &ops[expected]);  // the element itself, not a copy
        queue.pop_front();
        CHECK_FALSE(front.hook.is_linked());
    }
    CHECK(queue.empty());
}

TEST_CASE("erasing from the middle through iterator_to", "[op_queue]") {
    std::array<Op, 5> ops{};
    Queue queue;
    for (int i = 0; i < 5; ++i) {
        ops[i].value = i;
        queue.push_back(ops[i]);
    }
    queue.erase(queue.iterator_to(ops[2]));
    CHECK_FALSE(ops[2].hook.is_linked());
    CHECK(queue.size() == 4);
    CHECK(values_of(queue) == std::vector<int>{0, 1, 3, 4});

    queue.erase(queue.iterator_to(ops[4]));  // last
    queue.erase(queue.iterator_to(ops[0]));  // first
    CHECK(values_of(queue) == std::vector<int>{1, 3});

    // An unlinked op can be queued again, and goes to the back.
    queue.push_back(ops[2]);
    CHECK(values_of(queue) == std::vector<int>{1, 3, 2});
    queue.clear();
    for (const Op& op : ops) CHECK_FALSE(op.hook.is_linked());
}

TEST_CASE("is_linked follows membership", "[op_queue]") {
    Op op;
    CHECK_FALSE(op.hook.is_linked());
    Queue queue;
    queue.push_back(op);
    CHECK(op.hook.is_linked());
    queue.erase(queue.iterator_to(op));
    CHECK_FALSE(op.hook.is_linked());
}

TEST_CASE("an op moves between queues without copying", "[op_queue]") {
    Op a;
    Op b;
    a.value = 1;
    b.value = 2;
    Queue pending;
    Queue completed;
    pending.push_back(a);
    pending.push_back(b);

    pending.erase(pending.iterator_to(b));
    completed.push_back(b);
    CHECK(values_of(pending) == std::vector<int>{1});
    CHECK(values_of(completed) == std::vector<int>{2});
    CHECK(&completed.front() == &b);

    pending.clear();
    completed.clear();
    CHECK_FALSE(a.hook.is_linked());
    CHECK_FALSE(b.hook.is_linked());
}
