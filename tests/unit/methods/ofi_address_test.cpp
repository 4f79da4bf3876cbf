// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi address strings: the provider word, its default, and what each provider's rest must be.
#include <catch2/catch.hpp>

#include "methods/ofi/ofi_address.hpp"

using bmi::method::ofi::parse_address;
using bmi::method::ofi::shm_client_name;
using bmi::method::ofi::shm_endpoint_name;

TEST_CASE("an ofi address names its provider, or gets tcp") {
    auto tcp = parse_address("ofi+tcp://127.0.0.1:3334");
    REQUIRE(tcp);
    CHECK(tcp->provider == "tcp");
    CHECK(tcp->provider_hint() == "tcp;ofi_rxm");
    CHECK(tcp->node == "127.0.0.1");
    CHECK(tcp->service == "3334");

    auto bare = parse_address("ofi://127.0.0.1:3334");
    REQUIRE(bare);
    CHECK(bare->provider == "tcp");
    CHECK(bare->provider_hint() == "tcp;ofi_rxm");
    CHECK(bare->service == "3334");

    auto shm = parse_address("ofi+shm://name");
    REQUIRE(shm);
    CHECK(shm->provider == "shm");
    CHECK_FALSE(shm->has_port());
}

TEST_CASE("a malformed ofi address is refused") {
    CHECK_FALSE(parse_address("tcp://127.0.0.1:3334"));
    CHECK_FALSE(parse_address("ofi://"));
    CHECK_FALSE(parse_address("ofi://no-port"));
    CHECK_FALSE(parse_address("ofi+shm://a:b"));
    CHECK_FALSE(parse_address("ofi+shm://"));
    CHECK_FALSE(parse_address("ofi+shm://dir/name"));  // shm_open takes no directories
}

TEST_CASE("shm names: libfabric's form, and clients' own names read back as addresses") {
    CHECK(shm_endpoint_name("srv") == "fi_ns://srv");
    const std::string first = shm_client_name();
    const std::string second = shm_client_name();
    CHECK(first != second);
    auto parsed = parse_address("ofi+shm://" + first);
    REQUIRE(parsed);
    CHECK(parsed->node == first);
}
