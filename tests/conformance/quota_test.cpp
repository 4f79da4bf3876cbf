// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: a full unexpected quota holds peers back in the network, says so once on stderr
// without BMI_DEBUG, and BMI_UNEXPECTED_QUOTA_USE reports bytes used, the limit and the peers
// held back.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tests/captured_stderr.hpp"
#include "unexpected_burst.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

BMI_unexpected_quota_use quota_use(core::Instance& instance) {
    BMI_unexpected_quota_use use{-1, -1, -1};
    REQUIRE(instance.get_info(0, BMI_UNEXPECTED_QUOTA_USE, &use) == 0);
    return use;
}

// Progresses the server until `want` more unexpected messages arrived (kept in got) and
// `blocked` peers are held back by the quota; false at the 10 s deadline.
bool server_reaches(Side& server, std::vector<core::UnexpectedMessage>& got, std::size_t want,
                    int blocked) {
    const std::size_t target = got.size() + want;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage one[1];
        int outcount = 0;
        REQUIRE(server.instance->testunexpected(10, outcount, one) == 0);
        if (outcount == 1) got.push_back(one[0]);
        if (got.size() == target && quota_use(*server.instance).blocked_peers == blocked)
            return true;
    }
    return false;
}

// One unexpected message within deadline_ms; the count taken (0 or 1).
int receive_one_unexpected(core::Instance& server, core::UnexpectedMessage& got,
                           int deadline_ms = 30000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    int outcount = 0;
    while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
        if (server.testunexpected(20, outcount, std::span(&got, 1)) != 0) return 0;
    return outcount;
}

}  // namespace

TEST_CASE("a full unexpected quota is reported once and through BMI_UNEXPECTED_QUOTA_USE",
          "[conformance]") {
    // Each message costs its bytes plus 256 for its record, so two of 1792 bytes fill 4096.
    constexpr bmi_size_t quota = 4096, message = 2048 - 256;
    Pair pair = make_peers("tcp", "unexpected_quota=4096");
    Pump client_pump(*pair.client.instance);
    std::vector<char> out(static_cast<std::size_t>(message));
    fill_pattern(out.data(), out.size(), 5);
    // Posted only: the server makes progress (and so lets a send finish) in server_reaches.
    std::vector<bmi_op_id_t> sends;
    auto send = [&](bmi_msg_tag_t tag) {
        auto request = unexpected_request(pair.client, pair.server_addr, out.data(), message, tag);
        bmi_op_id_t id = 0;
        const int rc = pair.client.instance->post(request, id, nullptr);
        REQUIRE(rc >= 0);
        if (rc == 0) sends.push_back(id);
    };
    std::vector<core::UnexpectedMessage> got;

    CapturedStderr captured;
    // Two messages fill the quota; the third waits in the socket.
    for (bmi_msg_tag_t tag = 1; tag <= 3; ++tag) send(tag);
    REQUIRE(server_reaches(pair.server, got, 2, 1));
    BMI_unexpected_quota_use use = quota_use(*pair.server.instance);
    CHECK(use.used == quota);
    CHECK(use.limit == quota);
    CHECK(use.blocked_peers == 1);

    // Freeing one lets the third in; a fourth blocks the peer again, without a second warning.
    REQUIRE(pair.server.instance->unexpected_free(got[0].buffer) == 0);
    REQUIRE(server_reaches(pair.server, got, 1, 0));
    CHECK(quota_use(*pair.server.instance).used == quota);
    send(4);
    REQUIRE(server_reaches(pair.server, got, 0, 1));
    const std::string log = captured.stop();
    INFO("stderr: " << log);
    CHECK(count_of(log, "unexpected-message quota full") == 1);
    CHECK(count_of(log, "BMI_UNEXPECTED_QUOTA=") == 1);

    for (std::size_t i = 1; i < got.size(); ++i)
        REQUIRE(pair.server.instance->unexpected_free(got[i].buffer) == 0);
    REQUIRE(server_reaches(pair.server, got, 1, 0));
    REQUIRE(pair.server.instance->unexpected_free(got.back().buffer) == 0);
    CHECK(quota_use(*pair.server.instance).used == 0);
    for (bmi_op_id_t id : sends) CHECK(wait_op(pair.client, id).error == 0);
}

TEST_CASE("one peer cannot take more than its share of the unexpected quota", "[conformance]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    setenv("BMI_UNEXPECTED_PEER_QUOTA", "4096", 1);
    Pair pair = make_peers(scheme);
    unsetenv("BMI_UNEXPECTED_PEER_QUOTA");
    // A second client of the same server.
    Side other;
    REQUIRE(core::Instance::create(core::InitParams{}, other.instance) == 0);
    REQUIRE(other.instance->open_context(other.context) == 0);
    BMI_addr_t other_to_server = 0;
    REQUIRE(other.instance->addr_lookup(pair.server.instance->listen_addresses(),
                                        other_to_server) == 0);
    Pump client_pump(*pair.client.instance);
    Pump other_pump(*other.instance);

    // Empty messages cost 256 each: sixteen fill a 4096-byte share, the rest wait.
    std::vector<bmi_op_id_t> sends;
    for (bmi_msg_tag_t tag = 1; tag <= 20; ++tag) {
        auto request = unexpected_request(pair.client, pair.server_addr, nullptr, 0, tag);
        bmi_op_id_t id = 0;
        REQUIRE(pair.client.instance->post(request, id, nullptr) >= 0);
        if (id != 0) sends.push_back(id);
    }
    std::vector<core::UnexpectedMessage> got;
    const auto drain = [&](std::size_t want, std::chrono::milliseconds limit) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
            core::UnexpectedMessage one[1];
            int outcount = 0;
            REQUIRE(pair.server.instance->testunexpected(10, outcount, one) == 0);
            if (outcount == 1) got.push_back(one[0]);
        }
        return got.size();
    };
    constexpr std::chrono::seconds in_time{5};
    REQUIRE(drain(16, in_time) == 16);
    // The other four were sent with the first sixteen: past its share they would have come
    // with them, so a short wait shows they are held back.
    CHECK(drain(20, std::chrono::milliseconds(500)) == 16);

    // The other client still gets through.
    char hello[] = "other";
    auto request = unexpected_request(other, other_to_server, hello, sizeof hello, 99);
    bmi_op_id_t id = 0;
    REQUIRE(other.instance->post(request, id, nullptr) >= 0);
    REQUIRE(drain(17, in_time) == 17);
    CHECK(got.back().tag == 99);
    CHECK(got.back().size == static_cast<bmi_size_t>(sizeof hello));

    // Returning buffers lets the held-back messages in.
    for (auto& m : got) REQUIRE(pair.server.instance->unexpected_free(m.buffer) == 0);
    got.clear();
    CHECK(drain(4, in_time) == 4);
    for (auto& m : got) REQUIRE(pair.server.instance->unexpected_free(m.buffer) == 0);
    for (bmi_op_id_t sid : sends) CHECK(wait_op(pair.client, sid).error == 0);
    if (id != 0) CHECK(wait_op(other, id).error == 0);
}

TEST_CASE("a departed peer's share of the unexpected quota does not pass to the next peer",
          "[conformance]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("scheme " << scheme);
    setenv("BMI_UNEXPECTED_PEER_QUOTA", "4096", 1);
    Pair pair = make_peers(scheme);
    unsetenv("BMI_UNEXPECTED_PEER_QUOTA");
    core::Instance& server = *pair.server.instance;
    const auto take = [&](std::vector<core::UnexpectedMessage>& got, std::size_t want) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
            core::UnexpectedMessage one[1];
            int outcount = 0;
            REQUIRE(server.testunexpected(10, outcount, one) == 0);
            if (outcount == 1) got.push_back(one[0]);
        }
        return got.size();
    };
    const auto post_empty = [](Side& client, BMI_addr_t to, bmi_msg_tag_t tag) {
        auto request = unexpected_request(client, to, nullptr, 0, tag);
        bmi_op_id_t id = 0;
        REQUIRE(client.instance->post(request, id, nullptr) >= 0);
        return id;
    };
    // The server's test calls drop a departed client's address once nothing refers to it.
    const auto addresses_dropped = [&] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        int count = -1;
        while (std::chrono::steady_clock::now() < deadline) {
            REQUIRE(server.get_info(0, BMI_ADDRESS_COUNT, &count) == 0);
            if (count == 0) return true;
            core::UnexpectedMessage none[1];
            int outcount = 0;
            REQUIRE(server.testunexpected(10, outcount, none) == 0);
            REQUIRE(outcount == 0);
        }
        return false;
    };

    // The first client fills its share exactly (sixteen empty messages of 256) and leaves; the
    // server still holds the buffers, so the share stays charged after its address is gone.
    std::vector<core::UnexpectedMessage> held;
    {
        Pump client_pump(*pair.client.instance);
        std::vector<bmi_op_id_t> sends;
        for (bmi_msg_tag_t tag = 1; tag <= 16; ++tag)
            sends.push_back(post_empty(pair.client, pair.server_addr, tag));
        REQUIRE(take(held, 16) == 16);
        for (bmi_op_id_t id : sends)
            if (id != 0) REQUIRE(wait_op(pair.client, id).error == 0);
    }
    pair.client.instance.reset();
    REQUIRE(addresses_dropped());

    // New clients, one after the other, each sending one message. Each new peer is likely to
    // be allocated where a freed one was; none may start with the first client's charges.
    for (int round = 0; round < 4; ++round) {
        INFO("round " << round);
        Side next;
        REQUIRE(core::Instance::create(core::InitParams{}, next.instance) == 0);
        REQUIRE(next.instance->open_context(next.context) == 0);
        BMI_addr_t to_server = 0;
        REQUIRE(next.instance->addr_lookup(server.listen_addresses(), to_server) == 0);
        {
            Pump next_pump(*next.instance);
            const bmi_op_id_t id = post_empty(next, to_server, 100 + round);
            std::vector<core::UnexpectedMessage> got;
            REQUIRE(take(got, 1) == 1);
            CHECK(got[0].tag == 100 + round);
            REQUIRE(server.unexpected_free(got[0].buffer) == 0);
            if (id != 0) REQUIRE(wait_op(next, id).error == 0);
        }
        next.instance.reset();
        REQUIRE(addresses_dropped());
    }
    for (auto& m : held) REQUIRE(server.unexpected_free(m.buffer) == 0);
}

TEST_CASE("freed quota lets a parked message in before a sleeping test call ends",
          "[conformance]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    INFO("scheme " << scheme);
    // Room for four messages of 8 KB (bytes + 256 for the record); six are sent. No pump on
    // the server: its only progress is the test call below.
    Pair pair = make_peers(scheme, "unexpected_quota=32768");
    Pump client_pump(*pair.client.instance);
    constexpr int count = 6;
    constexpr bmi_size_t size = 8192 - 256;
    std::vector<std::vector<char>> out;
    const auto sends = post_unexpected_burst(pair, count, size, 600, 90, out);
    core::Instance& server = *pair.server.instance;
    std::vector<core::UnexpectedMessage> held;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (held.size() < 4 && std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage got[4];
        int outcount = 0;
        REQUIRE(server.testunexpected(20, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) held.push_back(got[k]);
    }
    REQUIRE(held.size() == 4);
    // The other two have arrived by now and are parked.
    for (int k = 0; k < 10; ++k) {
        core::UnexpectedMessage got[1];
        int outcount = 0;
        REQUIRE(server.testunexpected(50, outcount, got) == 0);
        REQUIRE(outcount == 0);
    }
    // In the direct wait (an instance with one method) a sleeping test call runs no progress
    // pass, and no fd says that memory was freed: without a retry before the sleep this call
    // would sleep its 10 s out and find the message only then.
    REQUIRE(server.unexpected_free(held[0].buffer) == 0);
    const auto start = std::chrono::steady_clock::now();
    core::UnexpectedMessage got[1];
    int outcount = 0;
    REQUIRE(server.testunexpected(10000, outcount, got) == 0);
    const auto waited = std::chrono::steady_clock::now() - start;
    REQUIRE(outcount == 1);
    CHECK(waited < std::chrono::seconds(5));
    REQUIRE(got[0].tag == 604);
    REQUIRE(check_pattern(got[0].buffer, static_cast<std::size_t>(size), 94));
    REQUIRE(server.unexpected_free(got[0].buffer) == 0);
    for (std::size_t k = 1; k < held.size(); ++k)
        REQUIRE(server.unexpected_free(held[k].buffer) == 0);
    REQUIRE(receive_one_unexpected(server, got[0]) == 1);
    REQUIRE(got[0].tag == 605);
    REQUIRE(server.unexpected_free(got[0].buffer) == 0);
    for (bmi_op_id_t id : sends) REQUIRE(wait_op(pair.client, id).error == 0);
}
