// SPDX-License-Identifier: LGPL-2.1-or-later
// Packing and unpacking of emulated list I/O, including lists that disagree in shape.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "bmi/core/list_io_emulation.hpp"

using namespace bmi::core;

TEST_CASE("list_total validates and sums") {
    char a[4], b[8];
    const void* list[2] = {a, b};
    bmi_size_t sizes[2] = {4, 8};
    REQUIRE(list_total(list, sizes, 2) == 12);
    REQUIRE(list_total(list, sizes, 0) == -1);
    REQUIRE(list_total(nullptr, sizes, 2) == -1);
    bmi_size_t negative[2] = {4, -1};
    REQUIRE(list_total(list, negative, 2) == -1);
    const void* with_null[2] = {a, nullptr};
    REQUIRE(list_total(with_null, sizes, 2) == -1);
    bmi_size_t zero_for_null[2] = {4, 0};
    REQUIRE(list_total(with_null, zero_for_null, 2) == 4);
    // 2^62 * 4 wraps to 0 in 64 bits; a wrapped sum must not pass as a total.
    const void* four[4] = {a, a, b, b};
    bmi_size_t huge[4] = {1ll << 62, 1ll << 62, 1ll << 62, 1ll << 62};
    REQUIRE(list_total(four, huge, 4) == -1);
}

TEST_CASE("pack then unpack into a differently split list restores the bytes") {
    std::vector<unsigned char> source(1000);
    std::iota(source.begin(), source.end(), 0);
    const void* send_list[3] = {source.data(), source.data() + 1, source.data() + 600};
    bmi_size_t send_sizes[3] = {1, 599, 400};
    void* packed = pack_list(send_list, send_sizes, 3, 1000);
    REQUIRE(packed != nullptr);
    REQUIRE(std::memcmp(packed, source.data(), 1000) == 0);

    std::vector<unsigned char> r0(333, 0xee), r1(700, 0xee);
    const void* recv_list[2] = {r0.data(), r1.data()};
    bmi_size_t recv_sizes[2] = {333, 700};
    SECTION("whole message") {
        unpack_list(packed, 1000, recv_list, recv_sizes, 2);
        REQUIRE(std::memcmp(r0.data(), source.data(), 333) == 0);
        REQUIRE(std::memcmp(r1.data(), source.data() + 333, 667) == 0);
        REQUIRE(r1[667] == 0xee);  // past the message: untouched
    }
    SECTION("short message fills only its bytes") {
        unpack_list(packed, 10, recv_list, recv_sizes, 2);
        REQUIRE(std::memcmp(r0.data(), source.data(), 10) == 0);
        REQUIRE(r0[10] == 0xee);
        REQUIRE(r1[0] == 0xee);
    }
    std::free(packed);
}
