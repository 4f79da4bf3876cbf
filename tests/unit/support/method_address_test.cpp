// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for address string parsing: schemes, host:port forms, formatting and lists.
#include "support/method_address/method_address.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

using namespace bmi::support;
using namespace std::string_view_literals;

TEST_CASE("split_scheme", "[method_address]") {
    auto tcp = split_scheme("tcp://host:3334");
    REQUIRE(tcp);
    CHECK(tcp->scheme == "tcp");
    CHECK(tcp->rest == "host:3334");

    auto shm = split_scheme("shm://name");
    REQUIRE(shm);
    CHECK(shm->scheme == "shm");
    CHECK(shm->rest == "name");

    auto verbs = split_scheme("verbs://mlx5_0:1/host:80");
    REQUIRE(verbs);
    CHECK(verbs->scheme == "verbs");
    CHECK(verbs->rest == "mlx5_0:1/host:80");

    CHECK(verbs->variant.empty());

    auto ofi = split_scheme("ofi+tcp://host:80");
    REQUIRE(ofi);
    CHECK(ofi->scheme == "ofi");
    CHECK(ofi->variant == "tcp");
    CHECK(ofi->rest == "host:80");

    auto empty_rest = split_scheme("tcp://");
    REQUIRE(empty_rest);
    CHECK(empty_rest->rest.empty());

    for (std::string_view bad :
         {""sv, "tcp"sv, "tcp:/h:1"sv, "://h:1"sv, "TCP://h:1"sv, "t cp://h:1"sv, "tcp-x://h:1"sv,
          "host:80"sv, "ofi+://h:1"sv, "+tcp://h:1"sv, "ofi+t+x://h:1"sv}) {
        CAPTURE(bad);
        CHECK_FALSE(split_scheme(bad));
    }
}

TEST_CASE("parse_host_port accepts IPv4, names and bracketed IPv6", "[method_address]") {
    auto v4 = parse_host_port("127.0.0.1:3334");
    REQUIRE(v4);
    CHECK(v4->host == "127.0.0.1");
    CHECK(v4->port == 3334);
    CHECK_FALSE(v4->bracketed);

    auto name = parse_host_port("node-17.cluster.example:80");
    REQUIRE(name);
    CHECK(name->host == "node-17.cluster.example");
    CHECK(name->port == 80);

    auto v6 = parse_host_port("[::1]:3334");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->port == 3334);
    CHECK(v6->bracketed);

    auto v6_long = parse_host_port("[fe80::1:2:3]:1");
    REQUIRE(v6_long);
    CHECK(v6_long->host == "fe80::1:2:3");
    CHECK(v6_long->port == 1);

    auto edges = parse_host_port("h:0");
    REQUIRE(edges);
    CHECK(edges->port == 0);
    auto top = parse_host_port("h:65535");
    REQUIRE(top);
    CHECK(top->port == 65535);
}

TEST_CASE("parse_host_port rejects malformed input", "[method_address]") {
    for (std::string_view bad : {
             ""sv,
             "host"sv,          // missing port
             "host:"sv,         // empty port
             ":80"sv,           // empty host
             "[]:80"sv,         // empty bracketed host
             "::1:80"sv,        // unbracketed IPv6 is ambiguous
             "fe80::1"sv,       // unbracketed IPv6 without port
             "[::1]"sv,         // bracketed without port
             "[::1]:"sv,        // bracketed, empty port
             "[::1]80"sv,       // no colon after the bracket
             "[::1:80"sv,       // unclosed bracket
             "[1.2.3.4]:80"sv,  // brackets are for IPv6 only
             "host:65536"sv,    // port too large
             "host:99999"sv,
             "host:4294967376"sv,  // would wrap to 80 in 32 bits
             "host:-1"sv,
             "host:+80"sv,
             "host:8o"sv,
             "host:80 "sv,
             "host: 80"sv,
             "ho st:80"sv,
             "a/b:80"sv,
             "host:80:81"sv,
         }) {
        CAPTURE(bad);
        CHECK_FALSE(parse_host_port(bad));
    }
}

TEST_CASE("format_host_port round trips through parse_host_port", "[method_address]") {
    CHECK(format_host_port("127.0.0.1", 3334) == "127.0.0.1:3334");
    CHECK(format_host_port("::1", 80) == "[::1]:80");
    CHECK(format_host_port("node", 0) == "node:0");

    struct Case {
        std::string host;
        std::uint16_t port;
    };
    for (const Case& c : {Case{"127.0.0.1", 1}, Case{"node-1.example", 65535}, Case{"::1", 3334},
                          Case{"fe80::abcd", 0}}) {
        CAPTURE(c.host, c.port);
        std::string text = format_host_port(c.host, c.port);
        auto parsed = parse_host_port(text);
        REQUIRE(parsed);
        CHECK(parsed->host == c.host);
        CHECK(parsed->port == c.port);
        CHECK(format_host_port(parsed->host, parsed->port) == text);
    }
}

TEST_CASE("split_address_list", "[method_address]") {
    using List = std::vector<std::string_view>;
    CHECK(split_address_list("tcp://a:1,shm://b") == List{"tcp://a:1", "shm://b"});
    CHECK(split_address_list("tcp://a:1") == List{"tcp://a:1"});
    CHECK(split_address_list(" tcp://a:1 , shm://b ") == List{"tcp://a:1", "shm://b"});
    CHECK(split_address_list(",,tcp://a:1,,") == List{"tcp://a:1"});
    CHECK(split_address_list("").empty());
    CHECK(split_address_list(" , ,").empty());
}

TEST_CASE("names_port tells a portless host from one with a port", "[method_address]") {
    using bmi::support::names_port;
    for (const char* portless : {"host", "10.0.0.1", "[::1]", ""})
        CHECK_FALSE(names_port(portless));
    for (const char* with : {"host:1", "host:", "[::1]:0", "10.0.0.1:3334"})
        CHECK(names_port(with));
}
