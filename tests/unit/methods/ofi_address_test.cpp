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

TEST_CASE("providers with addresses of their own: raw bytes to look up, a domain to listen") {
    using bmi::method::ofi::AddressForm;
    auto raw = parse_address("ofi+efa://0x00fe10AB");
    REQUIRE(raw);
    CHECK(raw->form == AddressForm::raw);
    CHECK(raw->provider_hint() == "efa");
    CHECK(raw->raw == std::vector<std::byte>{std::byte{0x00}, std::byte{0xfe}, std::byte{0x10},
                                             std::byte{0xab}});
    CHECK(bmi::method::ofi::format_raw(raw->raw) == "0x00fe10ab");
    CHECK(bmi::method::ofi::host_of(*raw) == "0x00fe10AB");  // each endpoint its own source

    auto listen_any = parse_address("ofi+cxi://");
    REQUIRE(listen_any);
    CHECK(listen_any->form == AddressForm::domain);
    CHECK(listen_any->node.empty());
    auto listen_on = parse_address("ofi+cxi://cxi1");
    REQUIRE(listen_on);
    CHECK(listen_on->form == AddressForm::domain);
    CHECK(listen_on->node == "cxi1");

    // A socket provider's raw form is its sockaddr; a bare word is a host without a port.
    auto tcp_raw = parse_address("ofi+tcp://0x02000d057f000001");
    REQUIRE(tcp_raw);
    CHECK(tcp_raw->form == AddressForm::raw);
    CHECK_FALSE(parse_address("ofi+tcp://cxi1"));
    CHECK_FALSE(parse_address("ofi+tcp://"));
}

TEST_CASE("a malformed raw address or domain is refused") {
    CHECK_FALSE(parse_address("ofi+efa://0x"));
    CHECK_FALSE(parse_address("ofi+efa://0x123"));   // half a byte
    CHECK_FALSE(parse_address("ofi+efa://0x12zz"));  // not hex
    CHECK_FALSE(parse_address("ofi+efa://0x" + std::string(2 * 257, 'a')));
    CHECK(parse_address("ofi+efa://0x" + std::string(2 * 256, 'a')));
    CHECK_FALSE(parse_address("ofi+efa://host:3334"));
    CHECK_FALSE(parse_address("ofi+efa://a/b"));
    CHECK_FALSE(parse_address("ofi+efa://a b"));
}

TEST_CASE("a peer counts by the host of its endpoint, or by the whole endpoint") {
    using bmi::method::ofi::host_of_endpoint;
    CHECK(host_of_endpoint("ofi+tcp://127.0.0.1:3334") == "127.0.0.1");
    CHECK(host_of_endpoint("ofi+shm://bmi-1-0") == "localhost");
    CHECK(host_of_endpoint("ofi+efa://0x00fe") == "0x00fe");
    CHECK(host_of_endpoint("not an address") == "not an address");
}
