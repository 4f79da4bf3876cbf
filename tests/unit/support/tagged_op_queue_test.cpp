// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for TaggedOpQueue: earliest posted first within a tag, tags independent, erase
// from anywhere, post order kept across tags, and nodes reused after a tag empties.
#include "support/op_queue/tagged_op_queue.hpp"

#include <boost/intrusive/list_hook.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace {

using SafeHook =
    boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

struct Op {
    std::int32_t tag = 0;
    int value = 0;
    SafeHook by_tag;
    SafeHook in_order;
};

using Queue =
    bmi::support::TaggedOpQueue<Op, std::int32_t, SafeHook, &Op::by_tag, &Op::in_order, &Op::tag>;

std::vector<int> values_of(const Queue& queue) {
    std::vector<int> out;
    for (const Op& op : queue) out.push_back(op.value);
    return out;
}

int take_value(Queue& queue, std::int32_t tag) {
    Op* op = queue.take_first(tag);
    return op == nullptr ? -1 : op->value;
}

// ops[i] gets value i and the tag in tags[i], and is pushed in that order.
template <std::size_t N>
void post_all(Queue& queue, std::array<Op, N>& ops, const std::array<std::int32_t, N>& tags) {
    for (std::size_t i = 0; i < N; ++i) {
        ops[i].value = static_cast<int>(i);
        ops[i].tag = tags[i];
        queue.push_back(ops[i]);
    }
}

// ops[i] gets value i and tag first_tag + i (a tag each), and is pushed in that order.
void post_each_on_its_tag(Queue& queue, std::vector<Op>& ops, std::int32_t first_tag) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
        ops[i].value = static_cast<int>(i);
        ops[i].tag = first_tag + static_cast<std::int32_t>(i);
        queue.push_back(ops[i]);
    }
}

}  // namespace

TEST_CASE("a tag's ops come out in post order, other tags untouched", "[tagged_op_queue]") {
    std::array<Op, 6> ops{};
    Queue queue;
    post_all(queue, ops, {7, 3, 7, 3, 7, 9});
    CHECK(queue.size() == 6);
    CHECK(queue.contains(7));
    CHECK_FALSE(queue.contains(8));

    CHECK(take_value(queue, 7) == 0);
    CHECK(take_value(queue, 7) == 2);
    CHECK(values_of(queue) == std::vector<int>{1, 3, 4, 5});
    CHECK(take_value(queue, 3) == 1);
    CHECK(take_value(queue, 7) == 4);
    CHECK_FALSE(queue.contains(7));
    CHECK(take_value(queue, 7) == -1);
    CHECK(take_value(queue, 8) == -1);  // a tag never posted
    CHECK(values_of(queue) == std::vector<int>{3, 5});
    CHECK_FALSE(ops[0].by_tag.is_linked());
    CHECK_FALSE(ops[0].in_order.is_linked());
    queue.clear();
    for (const Op& op : ops) CHECK_FALSE(op.in_order.is_linked());
}

TEST_CASE("erasing from the middle of a tag and of the post order", "[tagged_op_queue]") {
    std::array<Op, 5> ops{};
    Queue queue;
    post_all(queue, ops, {1, 1, 1, 2, 1});
    queue.erase(ops[2]);  // middle of tag 1
    CHECK_FALSE(ops[2].by_tag.is_linked());
    CHECK_FALSE(ops[2].in_order.is_linked());
    CHECK(values_of(queue) == std::vector<int>{0, 1, 3, 4});
    queue.erase(ops[3]);  // the only op of tag 2: the tag is gone
    CHECK_FALSE(queue.contains(2));
    queue.erase(ops[0]);  // first of tag 1
    CHECK(take_value(queue, 1) == 1);
    CHECK(take_value(queue, 1) == 4);
    CHECK(queue.empty());

    // An op erased earlier can be posted again; it goes behind everything already waiting.
    ops[1].tag = 5;
    queue.push_back(ops[1]);
    ops[2].tag = 5;
    queue.push_back(ops[2]);
    CHECK(take_value(queue, 5) == 1);
    CHECK(take_value(queue, 5) == 2);
}

TEST_CASE("front and begin follow post order across tags", "[tagged_op_queue]") {
    std::array<Op, 4> ops{};
    Queue queue;
    post_all(queue, ops, {4, 3, 2, 1});
    std::vector<int> drained;
    while (!queue.empty()) {
        Op& op = queue.front();
        queue.erase(op);
        drained.push_back(op.value);
    }
    CHECK(drained == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("many tags: each found directly, emptied tags reused", "[tagged_op_queue]") {
    constexpr int count = 20000;
    std::vector<Op> ops(count);
    Queue queue;
    post_each_on_its_tag(queue, ops, 1000);
    // Take every other tag from the back; the rest stay in post order.
    for (int i = count - 1; i >= 0; i -= 2) CHECK(take_value(queue, 1000 + i) == i);
    REQUIRE(queue.size() == count / 2);
    int expected = 0;
    for (const Op& op : queue) {
        CHECK(op.value == expected);
        expected += 2;
    }
    // A ping-pong on one tag after all that: posted, taken, posted again.
    Op ping;
    ping.tag = 1;
    for (int round = 0; round < 100; ++round) {
        ping.value = round;
        queue.push_back(ping);
        REQUIRE(take_value(queue, 1) == round);
    }
    queue.clear();
    CHECK(queue.empty());
    CHECK_FALSE(ops[0].by_tag.is_linked());
}

TEST_CASE("past the linear limit: same order, same erase, and back once empty",
          "[tagged_op_queue]") {
    constexpr int count = static_cast<int>(Queue::linear_limit) * 3;
    std::vector<Op> ops(count);
    Queue queue;
    for (int i = 0; i < count; ++i) {
        ops[i].value = i;
        ops[i].tag = i % 3;
        queue.push_back(ops[i]);
        // Ops filed before the index existed are found through it too.
        CHECK(ops[0].by_tag.is_linked() == (i >= static_cast<int>(Queue::linear_limit)));
    }
    queue.erase(ops[4]);  // tag 1, from the middle of its list
    queue.erase(ops[count - 1]);
    CHECK(take_value(queue, 1) == 1);
    CHECK(take_value(queue, 1) == 7);
    CHECK(take_value(queue, 2) == 2);
    CHECK(queue.contains(0));
    std::vector<int> in_order = values_of(queue);
    REQUIRE(in_order.size() == static_cast<std::size_t>(count - 5));
    CHECK(in_order[0] == 0);
    CHECK(in_order[1] == 3);
    CHECK(in_order[2] == 5);
    while (!queue.empty()) queue.erase(queue.front());
    for (const Op& op : ops) CHECK_FALSE(op.by_tag.is_linked());

    // Empty again: a few ops are walked, not filed by tag.
    queue.push_back(ops[0]);
    CHECK_FALSE(ops[0].by_tag.is_linked());
    CHECK(take_value(queue, 0) == 0);
}

TEST_CASE("emptied tags stay indexed for reuse, a bounded few of them", "[tagged_op_queue]") {
    // Past the linear limit, as a server with many receives waiting.
    constexpr int idle = static_cast<int>(Queue::linear_limit) + 1;
    std::vector<Op> waiting(idle);
    Queue queue;
    post_each_on_its_tag(queue, waiting, 100);
    REQUIRE(queue.indexed_tags() == static_cast<std::size_t>(idle));

    // A ping-pong on one tag: taken, its list stays, and an empty list matches nothing.
    Op ping;
    ping.tag = 1;
    for (int round = 0; round < 50; ++round) {
        ping.value = round;
        queue.push_back(ping);
        CHECK(queue.contains(1));
        REQUIRE(take_value(queue, 1) == round);
        CHECK_FALSE(queue.contains(1));
        CHECK(take_value(queue, 1) == -1);
    }
    CHECK(queue.indexed_tags() == static_cast<std::size_t>(idle) + 1);

    // A new tag per message (PVFS numbers its requests): the kept lists stay few.
    std::vector<Op> churn(1000);
    for (int i = 0; i < 1000; ++i) {
        churn[i].value = i;
        churn[i].tag = 5000 + i;
        queue.push_back(churn[i]);
        REQUIRE(take_value(queue, 5000 + i) == i);
        CHECK(queue.indexed_tags() <= static_cast<std::size_t>(idle) + 8);
    }
    // An old tag posted again after its list made room: found as before.
    churn[0].value = 7;
    queue.push_back(churn[0]);
    CHECK(take_value(queue, 5000) == 7);

    // The waiting receives were untouched, in post order; erased, the queue walks again.
    CHECK(values_of(queue).size() == static_cast<std::size_t>(idle));
    for (int i = 0; i < idle; ++i) CHECK(take_value(queue, 100 + i) == i);
    CHECK(queue.empty());
    queue.push_back(ping);
    CHECK_FALSE(ping.by_tag.is_linked());
    CHECK(take_value(queue, 1) == ping.value);
}
