// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: message classes of unexpected messages (the standalone dialect's
// BMI_post_sendunexpected_class / BMI_testunexpected_class) survive every method's framing,
// and testunexpected for one class passes over the others without losing or reordering them.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

// One unexpected message the client sends; the payload is fill_pattern(seed = tag).
struct Planned {
    std::uint8_t msg_class;
    bmi_msg_tag_t tag;
    bmi_size_t size;
    bool as_list = false;  // sent as a three-piece list
};

// Interleaved so that every class has messages before and after other classes'. `limit` is
// the method's unexpected limit: two messages are exactly that size. Class 3 goes last: once
// the server has it, everything before it from this client is in the unexpected queue.
std::vector<Planned> plan(bmi_size_t limit) {
    return {
        {0, 10, 0},         {1, 11, 1},   {7, 12, limit},      {255, 13, 100}, {0, 14, 4096},
        {1, 15, limit - 1}, {255, 16, 0}, {7, 17, 1008, true}, {1, 18, 17},    {0, 19, 333},
        {255, 20, limit},   {7, 21, 64},  {3, 22, 8},
    };
}

std::vector<Planned> of_class(const std::vector<Planned>& all, std::uint8_t msg_class) {
    std::vector<Planned> out;
    for (const auto& p : all)
        if (p.msg_class == msg_class) out.push_back(p);
    return out;
}

// Posts one classed unexpected send; returns its id (0 if it completed during the post).
bmi_op_id_t post_classed(Side& client, BMI_addr_t to, const Planned& p, std::vector<char>& data) {
    data.resize(static_cast<std::size_t>(p.size));
    fill_pattern(data.data(), data.size(), static_cast<std::uint32_t>(p.tag));
    auto request = unexpected_request(client, to, data.data(), p.size, p.tag);
    request.msg_class = p.msg_class;
    const void* pieces[3] = {};
    bmi_size_t sizes[3] = {};
    if (p.as_list) {
        // Uneven pieces: 5, size - 8, 3 (the plan's list message is larger than 8 bytes).
        pieces[0] = data.data();
        pieces[1] = data.data() + 5;
        pieces[2] = data.data() + p.size - 3;
        sizes[0] = 5;
        sizes[1] = p.size - 8;
        sizes[2] = 3;
        request.buffer = nullptr;
        request.list = pieces;
        request.sizes = sizes;
        request.list_count = 3;
    }
    bmi_op_id_t id = 0;
    const int rc = client.instance->post(request, id, nullptr);
    REQUIRE(rc >= 0);
    return rc == 0 ? id : 0;
}

// Takes unexpected messages (of one class, or of any with nullopt) until `want` arrived or
// 10 s passed; returns what it got.
std::vector<core::UnexpectedMessage> take(Side& server, std::optional<std::uint8_t> msg_class,
                                          std::size_t want) {
    std::vector<core::UnexpectedMessage> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage some[4];
        int outcount = 0;
        REQUIRE(server.instance->testunexpected(10, outcount, some, msg_class) == 0);
        got.insert(got.end(), some, some + outcount);
    }
    return got;
}

// True if nothing of that class (nullopt: of any) is waiting.
bool none_left(Side& server, std::optional<std::uint8_t> msg_class) {
    core::UnexpectedMessage some[4];
    int outcount = 0;
    REQUIRE(server.instance->testunexpected(0, outcount, some, msg_class) == 0);
    for (int i = 0; i < outcount; ++i) server.instance->unexpected_free(some[i].buffer);
    return outcount == 0;
}

// Checks got against expect in order, then frees every buffer got holds.
void check_and_free(Side& server, BMI_addr_t sender, std::vector<core::UnexpectedMessage>& got,
                    const std::vector<Planned>& expect) {
    CHECK(got.size() == expect.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        const auto& m = got[i];
        if (i < expect.size()) {
            const auto& p = expect[i];
            INFO("message " << i << " tag " << p.tag << " class " << int(p.msg_class));
            CHECK(m.error == 0);
            CHECK(int(m.msg_class) == int(p.msg_class));
            CHECK(m.tag == p.tag);
            CHECK(m.addr == sender);
            CHECK(m.size == p.size);
            if (m.size == p.size)
                CHECK(check_pattern(m.buffer, static_cast<std::size_t>(m.size),
                                    static_cast<std::uint32_t>(p.tag)));
        }
        CHECK(server.instance->unexpected_free(m.buffer) == 0);
    }
    got.clear();
}

}  // namespace

TEST_CASE("unexpected messages keep their class, and testunexpected for a class takes only it",
          "[conformance]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    auto options = GENERATE(as<std::string>{}, "", "emulate_lists=1");
    INFO("method " << scheme << " options '" << options << "'");
    Pair pair = make_peers(scheme, options);
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    const BMI_addr_t client_addr = introduce(pair);
    int limit = 0;
    REQUIRE(pair.client.instance->get_info(pair.server_addr, BMI_GET_UNEXP_SIZE, &limit) == 0);
    REQUIRE(limit >= 1024);

    const auto all = plan(limit);
    std::vector<std::vector<char>> payloads(all.size());
    std::vector<bmi_op_id_t> sends;
    for (std::size_t i = 0; i < all.size(); ++i)
        if (bmi_op_id_t id = post_classed(pair.client, pair.server_addr, all[i], payloads[i]))
            sends.push_back(id);
    for (bmi_op_id_t id : sends) REQUIRE(wait_op(pair.client, id).error == 0);

    // The last message first: to reach it, the filter passes over all the others.
    auto got = take(pair.server, 3, 1);
    REQUIRE(got.size() == 1);  // without it, the rest would only wait out its deadlines
    check_and_free(pair.server, client_addr, got, of_class(all, 3));
    CHECK(none_left(pair.server, 2));  // a class nobody sent

    for (std::uint8_t msg_class : std::initializer_list<std::uint8_t>{255, 7, 1}) {
        INFO("class " << int(msg_class));
        const auto expect = of_class(all, msg_class);
        got = take(pair.server, msg_class, expect.size());
        check_and_free(pair.server, client_addr, got, expect);
        CHECK(none_left(pair.server, msg_class));
    }

    // Without a class: what is left, class 0 only, in order.
    const auto rest = of_class(all, 0);
    got = take(pair.server, std::nullopt, rest.size());
    check_and_free(pair.server, client_addr, got, rest);
    CHECK(none_left(pair.server, std::nullopt));

    BMI_unexpected_quota_use use{-1, -1, -1};
    REQUIRE(pair.server.instance->get_info(0, BMI_UNEXPECTED_QUOTA_USE, &use) == 0);
    CHECK(use.used == 0);
}
