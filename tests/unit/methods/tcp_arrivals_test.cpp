// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer's arrivals by tag: the oldest of a tag first, other tags untouched, and the cookie of
// a waiting RTS known until that RTS leaves by any way out.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "methods/tcp/tcp_arrivals.hpp"

using bmi::method::tcp::Arrival;
using bmi::method::tcp::Arrivals;

namespace {
Arrival eager(bmi_msg_tag_t tag, bmi_size_t size) {
    Arrival a;
    a.tag = tag;
    a.size = size;
    return a;
}

Arrival rts(bmi_msg_tag_t tag, std::uint64_t connection, std::uint64_t cookie) {
    Arrival a;
    a.kind = Arrival::Kind::rts;
    a.tag = tag;
    a.connection_id = connection;
    a.cookie = cookie;
    return a;
}
}  // namespace

TEST_CASE("arrivals: a receive takes the oldest of its tag, whatever else is parked",
          "[tcp][arrivals]") {
    Arrivals arrivals;
    // Thousands parked on a tag nobody reads, interleaved with the ones read.
    for (int i = 0; i < 5000; ++i) {
        arrivals.push(eager(7, i));
        if (i % 1000 == 0) arrivals.push(eager(3, i));
    }
    REQUIRE(arrivals.size() == 5005);
    for (int want : {0, 1000, 2000, 3000, 4000}) {
        auto got = arrivals.take(3);
        REQUIRE(got);
        CHECK(got->size == want);
    }
    CHECK_FALSE(arrivals.take(3));
    CHECK_FALSE(arrivals.take(8));
    auto oldest = arrivals.take(7);
    REQUIRE(oldest);
    CHECK(oldest->size == 0);
    CHECK(arrivals.size() == 4999);
}

TEST_CASE("arrivals: an RTS cookie is announced until the RTS is taken, removed or cleared",
          "[tcp][arrivals]") {
    Arrivals arrivals;
    arrivals.push(rts(1, 16, 100));
    arrivals.push(rts(2, 16, 101));
    arrivals.push(rts(2, 17, 100));
    arrivals.push(eager(2, 8));
    CHECK(arrivals.announced(16, 100));
    CHECK(arrivals.announced(17, 100));
    CHECK_FALSE(arrivals.announced(16, 102));
    CHECK_FALSE(arrivals.announced(18, 100));

    auto taken = arrivals.take(1);
    REQUIRE(taken);
    CHECK_FALSE(arrivals.announced(16, 100));  // taken: the cookie may come again
    CHECK(arrivals.announced(17, 100));

    // The connection 16 closed: its RTS go, the eager one and connection 17's stay.
    std::vector<std::uint64_t> gone;
    arrivals.remove_if(
        [](const Arrival& a) { return a.kind != Arrival::Kind::eager && a.connection_id == 16; },
        [&](const Arrival& a) { gone.push_back(a.cookie); });
    CHECK(gone == std::vector<std::uint64_t>{101});
    CHECK_FALSE(arrivals.announced(16, 101));
    CHECK(arrivals.announced(17, 100));
    CHECK(arrivals.size() == 2);

    // Within tag 2, the RTS of connection 17 came before the eager message.
    auto first = arrivals.take(2);
    REQUIRE(first);
    CHECK(first->kind == Arrival::Kind::rts);
    arrivals.push(rts(5, 17, 100));
    arrivals.clear();
    CHECK(arrivals.empty());
    CHECK_FALSE(arrivals.announced(17, 100));
}
