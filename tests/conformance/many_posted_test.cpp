// SPDX-License-Identifier: LGPL-2.1-or-later
// A server with 20,000 receives posted toward one client (issue 18: "flat as connections
// grow"): messages to tags in random order each land in the earliest receive of their tag,
// intact, and a cancel afterwards still finds every receive left. Matching by tag must stay
// exact however many receives wait, and none may be lost from the index.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

constexpr int tags = 10000;  // every tag has two receives: index t and t + tags
constexpr int receives = 2 * tags;
constexpr int tags_sent = 3000;  // each gets two messages, which fill both its receives
constexpr bmi_msg_tag_t first_tag = 1000;
constexpr bmi_size_t small_capacity = 64;
constexpr bmi_size_t large_size = 200000;  // past every method's eager limit

// Every hundredth tag carries a large message, so rendezvous receives are matched too.
bool large_tag(int t) { return t % 100 == 0; }
bmi_size_t size_for(int index) {
    const int t = index % tags;
    return large_tag(t) ? large_size : 1 + index % small_capacity;
}

}  // namespace

TEST_CASE("20,000 receives posted toward one peer: exact, ordered, all cancellable",
          "[conformance][posted]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Pair pair = make_peers(scheme);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    const auto started = std::chrono::steady_clock::now();

    std::vector<std::vector<char>> in(receives);
    std::vector<bmi_op_id_t> ids(receives, 0);
    for (int i = 0; i < receives; ++i) {
        const bmi_size_t capacity = large_tag(i % tags) ? large_size : small_capacity;
        in[i].assign(static_cast<std::size_t>(capacity), 0);
        bmi_size_t actual = -1;
        REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in[i].data(),
                                                        capacity, first_tag + i % tags),
                                           ids[i], &actual) == 0);
    }

    std::vector<int> order(tags);
    for (int t = 0; t < tags; ++t) order[t] = t;
    std::shuffle(order.begin(), order.end(), std::mt19937(18));
    order.resize(tags_sent);
    std::vector<bool> matched(receives, false);
    std::vector<char> out(static_cast<std::size_t>(large_size));
    // Two messages per tag, the second sent only after the first landed: the first must take
    // the receive posted first (index t), the second the other one (t + tags).
    for (int t : order) {
        for (int index : {t, t + tags}) {
            const bmi_size_t size = size_for(index);
            fill_pattern(out.data(), static_cast<std::size_t>(size),
                         static_cast<std::uint32_t>(index));
            // The send is waited for after the receive: a large one needs the server's
            // progress, which only the server's wait makes.
            bmi_op_id_t sid = 0;
            const int sent = pair.client.instance->post(
                send_request(pair.client, pair.server_addr, out.data(), size, first_tag + t), sid,
                nullptr);
            REQUIRE(sent >= 0);
            auto got = wait_op(pair.server, ids[index]);
            if (sent == 0) REQUIRE(wait_op(pair.client, sid).error == 0);
            REQUIRE(got.error == 0);
            REQUIRE(got.actual_size == size);
            REQUIRE(check_pattern(in[index].data(), static_cast<std::size_t>(size),
                                  static_cast<std::uint32_t>(index)));
            matched[index] = true;
        }
    }

    // Cancel every receive no message reached; each must come back cancelled, once.
    for (int i = 0; i < receives; ++i)
        if (!matched[i]) REQUIRE(pair.server.instance->cancel(ids[i], pair.server.context) == 0);
    std::vector<bmi_op_id_t> cancelled;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (cancelled.size() < static_cast<std::size_t>(receives - 2 * tags_sent)) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        core::Completion got[256];
        int outcount = 0;
        REQUIRE(pair.server.instance->testcontext(pair.server.context, 10, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) {
            REQUIRE(got[k].error == -BMI_ECANCEL);
            cancelled.push_back(got[k].id);
        }
    }
    std::vector<bmi_op_id_t> expected;
    for (int i = 0; i < receives; ++i)
        if (!matched[i]) expected.push_back(ids[i]);
    std::sort(expected.begin(), expected.end());
    std::sort(cancelled.begin(), cancelled.end());
    REQUIRE(cancelled == expected);

    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
    INFO("took " << seconds.count() << " s");
    CHECK(seconds.count() < 120.0);
}
