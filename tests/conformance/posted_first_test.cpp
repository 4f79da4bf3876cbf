// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: large receives posted before their messages. A method may tell the sender that
// such a receive waits (tcp's and ofi's grants), so that the message skips the rendezvous; BMI's
// matching must not change: a tag's messages still take its receives in order, and a cancelled
// receive leaves the message to the next one. Every compiled method.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "attacker.hpp"
#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

constexpr bmi_size_t large = 1 << 20;

// Long enough for a grant to cross while the pumps run; the cases hold without one too.
void let_grants_cross() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

bmi_op_id_t post_recv(Side& side, BMI_addr_t from, std::vector<char>& into, bmi_msg_tag_t tag) {
    bmi_op_id_t id = 0;
    REQUIRE(side.instance->post(recv_request(side, from, into.data(), large, tag), id, nullptr) ==
            0);
    return id;
}

bmi_op_id_t post_send(Side& side, BMI_addr_t to, const std::vector<char>& from, bmi_msg_tag_t tag) {
    bmi_op_id_t id = 0;
    const int rc = side.instance->post(
        send_request(side, to, from.data(), static_cast<bmi_size_t>(from.size()), tag), id,
        nullptr);
    REQUIRE(rc >= 0);
    return rc == 1 ? 0 : id;
}

// Two instances of one method with their pumps running, the server knowing the client.
struct Exchange {
    explicit Exchange(const std::string& scheme)
        : pair(make_peers(scheme)),
          server_pump(*pair.server.instance),
          client_pump(*pair.client.instance),
          client_addr(introduce(pair)) {}
    Pair pair;
    Pump server_pump;
    Pump client_pump;
    BMI_addr_t client_addr;
};

std::vector<char> pattern(std::size_t size, std::uint32_t seed) {
    std::vector<char> bytes(size);
    fill_pattern(bytes.data(), size, seed);
    return bytes;
}

}  // namespace

TEST_CASE("a large receive posted first takes its message, under a grant where there is one",
          "[conformance][grants]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Exchange ex(scheme);
    const auto before = adapter_for(scheme).sent_under_grant(*ex.pair.client.instance);
    std::vector<char> in(large);
    const bmi_op_id_t rid = post_recv(ex.pair.server, ex.client_addr, in, 5);
    let_grants_cross();
    const auto out = pattern(large, 11);
    const bmi_op_id_t sid = post_send(ex.pair.client, ex.pair.server_addr, out, 5);
    const auto got = wait_op(ex.pair.server, rid);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == large);
    REQUIRE(check_pattern(in.data(), in.size(), 11));
    if (sid != 0) REQUIRE(wait_op(ex.pair.client, sid).error == 0);
    if (before)
        REQUIRE(*adapter_for(scheme).sent_under_grant(*ex.pair.client.instance) == *before + 1);
}

TEST_CASE("a small message sent before a large one takes the large receive posted first",
          "[conformance][grants]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Exchange ex(scheme);
    const auto before = adapter_for(scheme).sent_under_grant(*ex.pair.client.instance);
    std::vector<char> first(large), second(large);
    const bmi_op_id_t r1 = post_recv(ex.pair.server, ex.client_addr, first, 6);
    const bmi_op_id_t r2 = post_recv(ex.pair.server, ex.client_addr, second, 6);
    let_grants_cross();
    const auto small = pattern(100, 21), big = pattern(large, 22);
    const bmi_op_id_t s1 = post_send(ex.pair.client, ex.pair.server_addr, small, 6);
    const bmi_op_id_t s2 = post_send(ex.pair.client, ex.pair.server_addr, big, 6);
    const auto got1 = wait_op(ex.pair.server, r1), got2 = wait_op(ex.pair.server, r2);
    REQUIRE(got1.error == 0);
    REQUIRE(got1.actual_size == 100);
    REQUIRE(check_pattern(first.data(), 100, 21));
    REQUIRE(got2.error == 0);
    REQUIRE(got2.actual_size == large);
    REQUIRE(check_pattern(second.data(), second.size(), 22));
    for (bmi_op_id_t id : {s1, s2})
        if (id != 0) REQUIRE(wait_op(ex.pair.client, id).error == 0);
    // The small message made the grant void: the large one went by rendezvous.
    if (before) REQUIRE(*adapter_for(scheme).sent_under_grant(*ex.pair.client.instance) == *before);
}

TEST_CASE("a cancelled large receive leaves its tag's next message to the next receive",
          "[conformance][grants]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    Exchange ex(scheme);
    std::vector<char> cancelled(large, 0), taken(large);
    const bmi_op_id_t r1 = post_recv(ex.pair.server, ex.client_addr, cancelled, 7);
    let_grants_cross();
    REQUIRE(ex.pair.server.instance->cancel(r1, ex.pair.server.context) == 0);
    REQUIRE(wait_op(ex.pair.server, r1).error == -BMI_ECANCEL);
    const bmi_op_id_t r2 = post_recv(ex.pair.server, ex.client_addr, taken, 7);
    const auto out = pattern(large, 31);
    const bmi_op_id_t sid = post_send(ex.pair.client, ex.pair.server_addr, out, 7);
    const auto got = wait_op(ex.pair.server, r2);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == large);
    REQUIRE(check_pattern(taken.data(), taken.size(), 31));
    REQUIRE(cancelled == std::vector<char>(large, 0));  // nothing landed after the cancel
    if (sid != 0) REQUIRE(wait_op(ex.pair.client, sid).error == 0);
}

TEST_CASE("a cancel racing a large message ends its receive once, and the message is not lost",
          "[conformance][grants]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("method " << scheme);
    const MethodAdapter& adapter = adapter_for(scheme);
    if (!adapter.cancel_in_flight.empty()) {
        WARN("SKIP " << scheme << ": " << adapter.cancel_in_flight);
        return;
    }
    Exchange ex(scheme);
    for (std::uint32_t round = 0; round < 8; ++round) {
        INFO("round " << round);
        std::vector<char> first(large), second(large);
        const bmi_op_id_t r1 = post_recv(ex.pair.server, ex.client_addr, first, 8);
        let_grants_cross();
        const auto out = pattern(large, 40 + round);
        const bmi_op_id_t sid = post_send(ex.pair.client, ex.pair.server_addr, out, 8);
        REQUIRE(ex.pair.server.instance->cancel(r1, ex.pair.server.context) == 0);
        const auto got1 = wait_op(ex.pair.server, r1);
        if (got1.error == 0) {  // the data won the race
            REQUIRE(got1.actual_size == large);
            REQUIRE(check_pattern(first.data(), first.size(), 40 + round));
        } else {
            REQUIRE(got1.error == -BMI_ECANCEL);
            const bmi_op_id_t r2 = post_recv(ex.pair.server, ex.client_addr, second, 8);
            const auto got2 = wait_op(ex.pair.server, r2);
            REQUIRE(got2.error == 0);
            REQUIRE(check_pattern(second.data(), second.size(), 40 + round));
        }
        if (sid != 0) REQUIRE(wait_op(ex.pair.client, sid).error == 0);
    }
}
