// SPDX-License-Identifier: LGPL-2.1-or-later
// The registration cache: BMI_memalloc memory is registered once and hit on every receive (a
// send registers exactly the bytes it offers, for one transfer); freed and reallocated memory
// (BMI_memfree or plain free) still moves the right data.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "harness.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

method::verbs::Stats stats_of(Side& side, BMI_addr_t addr) {
    method::verbs::Stats s;
    REQUIRE(side.instance->get_info(addr, method::verbs::get_stats_option, &s) == 0);
    return s;
}

// Sends size bytes from out (client) into in (server) as one rendezvous message.
void transfer(Pair& pair, BMI_addr_t client_addr, void* out, void* in, bmi_size_t size, int tag) {
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in, size, tag), rid,
                                       nullptr) == 0);
    REQUIRE(post_and_wait(pair.client, send_request(pair.client, pair.server_addr, out, size, tag))
                .error == 0);
    auto got = wait_op(pair.server, rid);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == size);
}
}  // namespace

TEST_CASE("verbs: BMI_memalloc memory is pre-registered for receives; free and reuse stay correct",
          "[verbs]") {
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    constexpr bmi_size_t size = 4 << 20;

    auto before_c = stats_of(pair.client, pair.server_addr);
    auto before_s = stats_of(pair.server, client_addr);
    void* first = nullptr;
    int reused = 0;
    for (int round = 0; round < 6; ++round) {
        void* out = pair.client.instance->memalloc(pair.server_addr, size);
        void* in = pair.server.instance->memalloc(client_addr, size);
        REQUIRE(out != nullptr);
        REQUIRE(in != nullptr);
        if (round == 0) first = out;
        if (out == first) ++reused;
        fill_pattern(out, static_cast<std::size_t>(size), 100 + round);
        transfer(pair, client_addr, out, in, size, 20 + round);
        REQUIRE(check_pattern(in, static_cast<std::size_t>(size), 100 + round));
        // The same buffers again: still registered, still right.
        fill_pattern(out, static_cast<std::size_t>(size), 200 + round);
        transfer(pair, client_addr, out, in, size, 40 + round);
        REQUIRE(check_pattern(in, static_cast<std::size_t>(size), 200 + round));
        REQUIRE(pair.client.instance->memfree(pair.server_addr, out) == 0);
        REQUIRE(pair.server.instance->memfree(client_addr, in) == 0);
    }
    auto after_c = stats_of(pair.client, pair.server_addr);
    auto after_s = stats_of(pair.server, client_addr);
    INFO("address reused in " << reused << " of 6 rounds");
    // Every rendezvous receive found its memory registered; every send registered what it
    // offered for itself, so the rkey it sent opens nothing else of the region.
    REQUIRE(after_c.reg_hits == before_c.reg_hits);
    REQUIRE(after_c.reg_misses - before_c.reg_misses == 12);
    REQUIRE(after_s.reg_hits - before_s.reg_hits == 12);
    REQUIRE(after_s.reg_misses == before_s.reg_misses);
}

TEST_CASE("verbs: application memory freed and reallocated at the same address", "[verbs]") {
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    constexpr std::size_t size = 3 << 20;  // large enough that malloc maps and unmaps it
    std::vector<char> in(size);
    for (int round = 0; round < 4; ++round) {
        char* out = static_cast<char*>(std::malloc(size));
        REQUIRE(out != nullptr);
        fill_pattern(out, size, 300 + round);
        transfer(pair, client_addr, out, in.data(), static_cast<bmi_size_t>(size), 60 + round);
        REQUIRE(check_pattern(in.data(), size, 300 + round));
        std::free(out);  // new pages next round, often at the same address
    }
}
