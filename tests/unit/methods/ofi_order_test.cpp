// SPDX-License-Identifier: LGPL-2.1-or-later
// MessageOrder (methods/ofi/ofi_order.hpp): a peer's numbered messages are taken in the order
// they were sent, whatever order they complete in, and a peer that breaks the numbering is
// told apart from one whose message is only late.
#include <catch2/catch.hpp>

#include <deque>

#include "methods/ofi/ofi_method_impl.hpp"

using namespace bmi::method::ofi;

namespace {
// The order's bookkeeping never looks into a buffer: distinct ones are all it needs.
Request& buffer(std::size_t i) {
    static std::deque<Request> buffers(300);
    return buffers[i];
}
}  // namespace

TEST_CASE("ofi order: an early message waits until those before it were taken", "[ofi][order]") {
    MessageOrder order;
    order.set_peer_numbers(true);
    // 0 completes last: 1 and 2 came first and wait.
    CHECK(order.turn_of(1) == MessageOrder::Turn::early);
    REQUIRE(order.wait(buffer(1), 1));
    CHECK(order.turn_of(2) == MessageOrder::Turn::early);
    REQUIRE(order.wait(buffer(2), 2));
    CHECK(order.any_waiting());
    CHECK(order.next_waiting() == nullptr);  // 0 has not come
    CHECK(order.turn_of(0) == MessageOrder::Turn::now);
    order.taken();
    CHECK(order.next_waiting() == &buffer(1));
    order.taken();
    CHECK(order.next_waiting() == &buffer(2));
    order.taken();
    CHECK_FALSE(order.any_waiting());
    CHECK(order.taken_count() == 3);
    // A number already taken is stale: a peer of ours never sends it again.
    CHECK(order.turn_of(1) == MessageOrder::Turn::stale);
}

TEST_CASE("ofi order: numbers wrap, and the window is what a peer may have on its way",
          "[ofi][order]") {
    MessageOrder order;
    for (int i = 0; i < 250; ++i) order.taken();
    CHECK(order.turn_of(250) == MessageOrder::Turn::now);
    CHECK(order.turn_of(static_cast<std::uint8_t>(250 + MessageOrder::most_waiting)) ==
          MessageOrder::Turn::early);
    CHECK(order.turn_of(static_cast<std::uint8_t>(250 + MessageOrder::most_waiting + 1)) ==
          MessageOrder::Turn::stale);
    CHECK(order.turn_of(249) == MessageOrder::Turn::stale);
    REQUIRE(order.wait(buffer(3), 2));  // 258 mod 256
    for (int i = 0; i < 8; ++i) order.taken();
    CHECK(order.next_waiting() == &buffer(3));
}

TEST_CASE("ofi order: a number twice, or more waiting than the bound, is refused", "[ofi][order]") {
    MessageOrder order;
    REQUIRE(order.wait(buffer(0), 5));
    CHECK_FALSE(order.wait(buffer(1), 5));
    for (std::size_t i = 1; i < MessageOrder::most_waiting; ++i)
        REQUIRE(order.wait(buffer(i), static_cast<std::uint8_t>(5 + i)));
    CHECK_FALSE(order.wait(buffer(200), 200));
    // A new handshake hands back every buffer that waited and counts from 0 again.
    order.sent();
    CHECK(order.restart().size() == MessageOrder::most_waiting);
    CHECK_FALSE(order.any_waiting());
    CHECK(order.next_out() == 0);
    CHECK_FALSE(order.peer_numbers());
    CHECK(order.turn_of(0) == MessageOrder::Turn::now);
}
