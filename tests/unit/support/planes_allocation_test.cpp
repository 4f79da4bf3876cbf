// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocation model's text form: requests and allocations, port ranges, and a table of
// malformed input where every case is an error naming its field.
#include <catch2/catch.hpp>

#include <string>

#include "support/planes/allocation.hpp"
#include "support/planes/port_ranges.hpp"

using namespace bmi::support::planes;

TEST_CASE("port ranges read and print the RFC's form", "[planes][ports]") {
    std::string why;
    const auto p = PortRanges::parse("33005,32000-32100,38123-38146", why);
    REQUIRE(p);
    CHECK(p->count() == 101 + 1 + 24);
    CHECK(p->text() == "32000-32100,33005,38123-38146");
    CHECK(p->contains(33005));
    CHECK_FALSE(p->contains(33006));
    PortRanges q;
    q.add({10, 12});
    q.add({14, 15});
    q.add({13, 13});
    CHECK(q.text() == "10-15");
    CHECK_FALSE(q.overlaps(*p));
    q.add({32100, 32100 + 0});  // touches p only at 32100
    CHECK(q.overlaps(*p));
}

TEST_CASE("an allocation's text form round-trips", "[planes][allocation]") {
    const char* text = "# written by bmi-alloc\n"
                       "id=bmi.storage type=tcp plane=10.20.0.0/16 endpts=2 ports=32000-32001 "
                       "qos=bulk bw=200 key_file=/run/bmi/bmi.storage.key encryption=require "
                       "degraded=bw\n"
                       "id=bmi.ib type=verbs plane=mlx5_0:1 endpts=1; id=bmi.local type=shm "
                       "plane=node7 endpts=1\n";
    ParseError error;
    const auto all = parse_allocations(text, "alloc.txt", error);
    REQUIRE(all);
    REQUIRE(all->size() == 3);
    const Allocation& a = (*all)[0];
    CHECK(a.id == "bmi.storage");
    CHECK(a.type == PlaneType::tcp);
    CHECK(a.plane == "10.20.0.0/16");
    CHECK(a.endpoints == 2);
    CHECK(a.ports.text() == "32000-32001");
    CHECK(a.qos == "bulk");
    CHECK(a.bandwidth_mbps == 200);
    CHECK(a.key_file == "/run/bmi/bmi.storage.key");
    CHECK(a.encryption == "require");
    CHECK((*all)[1].encryption.empty());
    CHECK(a.degraded == std::vector<std::string>{"bw"});
    CHECK((*all)[2].type == PlaneType::shm);
    for (const Allocation& one : *all) {
        const auto again = parse_allocations(format_allocation(one), "again", error);
        REQUIRE(again);
        CHECK(format_allocation(again->front()) == format_allocation(one));
    }
}

TEST_CASE("every bandwidth an allocation or request holds is written so it reads back",
          "[planes][allocation][fuzz]") {
    // Found by tests/fuzz/planes_text: "%.6g" wrote bw=6005555 as 6.00556e+06, which the
    // fixed-notation parser refuses, and rounded 1234567.5 to 1.23457e+06.
    for (const char* bw : {"6005555", "1234567.5", "0.000008", "0.0000123", "600", "0.5",
                           "1000000000", "999999999.99"}) {
        ParseError error;
        const std::string line = "id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=1 bw=";
        const auto all = parse_allocations(line + bw, "bw", error);
        REQUIRE(all);
        const auto again = parse_allocations(format_allocation(all->front()), "again", error);
        REQUIRE(again);
        CHECK(again->front().bandwidth_mbps == all->front().bandwidth_mbps);
        const std::string request = "id=a type=tcp endpts=1 bw=";
        const auto requests = parse_requests(request + bw, "r", error);
        REQUIRE(requests);
        const auto request_again = parse_requests(format_request(requests->front()), "r", error);
        REQUIRE(request_again);
        CHECK(request_again->front().bandwidth_mbps.value ==
              requests->front().bandwidth_mbps.value);
    }
}

TEST_CASE("a request carries the RFC's attributes, each maybe required", "[planes][request]") {
    ParseError error;
    const auto reqs = parse_requests(
        "id=bmi.storage type=tcp endpts=4! plane=storage bw=200 qos=fast! key=yes!", "req", error);
    REQUIRE(reqs);
    const RequestEntry& r = reqs->front();
    CHECK(r.id == "bmi.storage");
    CHECK(*r.type.value == PlaneType::tcp);
    CHECK(*r.endpoints.value == 4);
    CHECK(r.endpoints.required);
    CHECK(*r.plane.value == "storage");
    CHECK_FALSE(r.plane.required);
    CHECK(*r.bandwidth_mbps.value == 200);
    CHECK_FALSE(r.bandwidth_mbps.required);
    CHECK(r.qos.required);
    CHECK(*r.key.value);
    CHECK(format_request(r) ==
          "id=bmi.storage type=tcp endpts=4! plane=storage qos=fast! bw=200 key=yes!");
    const auto by_cidr = parse_requests("id=a type=tcp endpts=1 plane=10.20.0.0/16!", "req", error);
    REQUIRE(by_cidr);
    CHECK(*by_cidr->front().plane.value == "10.20.0.0/16");
}

TEST_CASE("malformed allocations are errors naming the field, never defaults",
          "[planes][allocation]") {
    const std::string good_tail = " plane=10.0.0.0/8 endpts=1 ports=1000";
    struct Case {
        std::string text;
        const char* field;
        const char* says;
    };
    const Case cases[] = {
        {"type=tcp" + good_tail, "id", "missing"},
        {"id=a" + good_tail, "type", "missing"},
        {"id=a type=tcp endpts=1 ports=1000", "plane", "missing"},
        {"id=a type=tcp plane=10.0.0.0/8 ports=1000", "endpts", "missing"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1", "ports", "missing"},
        {"id=a/b type=tcp" + good_tail, "id", "not a name"},
        {"id=pmix.mine type=tcp" + good_tail, "id", "PMIx reserves"},
        {"id=a type=udp" + good_tail, "type", "not tcp, shm, verbs or ofi"},
        {"id=a type=tcp plane=10.0.0.1/8 endpts=1 ports=1000", "plane", "host bits"},
        {"id=a type=tcp plane=storage endpts=1 ports=1000", "plane", "not a CIDR"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=0 ports=1000", "endpts", "not a count"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=four ports=1000", "endpts", "not a count"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=2 ports=1000", "ports",
         "1 port(s) for 2 endpoints"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=0", "ports", "not a port"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=1000,", "ports", "not a port"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=5-1", "ports", "backwards"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=1-9,5", "ports", "listed twice"},
        {"id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=1 -2", "-2", "not key=value"},
        {"id=a type=shm plane=n1 endpts=1 ports=1000", "ports", "only tcp"},
        {"id=a type=tcp" + good_tail + " bw=0", "bw", "not a bandwidth"},
        {"id=a type=tcp" + good_tail + " bw=1e400", "bw", "not a bandwidth"},
        {"id=a type=tcp" + good_tail + " bw=inf", "bw", "not a bandwidth"},
        // Outside one byte a second to a petabit a second: no pacing rate, or none that fits.
        {"id=a type=tcp" + good_tail + " bw=0.0000079", "bw", "0.000008 to 1000000000 Mbit/s"},
        {"id=a type=tcp" + good_tail + " bw=1000000000.5", "bw", "0.000008 to 1000000000"},
        {"id=a type=tcp" + good_tail + " bw=200000000000000", "bw", "not a bandwidth"},
        {"id=a type=tcp" + good_tail + " qos=a,b", "qos", "not a QoS level"},
        {"id=a type=tcp" + good_tail + " key_file=k.key", "key_file", "not an absolute path"},
        {"id=a type=tcp" + good_tail + " degraded=ports", "degraded", "is not plane"},
        {"id=a type=tcp" + good_tail + " encryption=yes", "encryption",
         "is not one of off|prefer|require"},
        {"id=a type=tcp" + good_tail + " encryption=", "encryption", "no value"},
        {"id=a type=tcp" + good_tail + " colour=red", "colour", "unknown field"},
        {"id=a type=tcp" + good_tail + " id=b", "id", "given twice"},
        {"id=a type=tcp" + good_tail + " bw=", "bw", "no value"},
        {"id=a type=tcp" + good_tail + " =5", "", "has no key"},
        {"id=a type=tcp" + good_tail + " bw=5!", "bw", "belongs in requests"},
        {"id=a type=tcp" + good_tail + "\nid=a type=tcp" + good_tail, "id", "appears twice"},
    };
    for (const Case& c : cases) {
        INFO(c.text);
        ParseError error;
        CHECK_FALSE(parse_allocations(c.text, "BMI_ALLOCATION", error));
        CHECK(error.source == "BMI_ALLOCATION");
        CHECK(error.field == c.field);
        CHECK(error.text().find(c.says) != std::string::npos);
    }
    ParseError error;
    CHECK_FALSE(parse_allocations("  # nothing here\n", "f", error));
    CHECK(error.text().find("no entry") != std::string::npos);
}

TEST_CASE("malformed requests are errors naming the field", "[planes][request]") {
    struct Case {
        const char* text;
        const char* field;
        const char* says;
    };
    const Case cases[] = {
        {"type=tcp endpts=1", "id", "missing"},
        {"id=a endpts=1", "type", "missing"},
        {"id=a type=tcp", "endpts", "missing"},
        {"id=a type=tcp endpts=1 plane=10.0.0.1/8", "plane", "host bits"},
        {"id=a type=tcp endpts=1 key=maybe", "key", "not yes or no"},
        {"id=a type=tcp endpts=1 bw=fast!", "bw", "not a bandwidth"},
        {"id=a type=tcp endpts=1 ports=1000", "ports", "unknown field"},
        {"id=a type=tcp endpts=1 qos=x qos=y", "qos", "given twice"},
    };
    for (const Case& c : cases) {
        INFO(c.text);
        ParseError error;
        CHECK_FALSE(parse_requests(c.text, "req.txt", error));
        CHECK(error.text().rfind("req.txt:1: ", 0) == 0);
        CHECK(error.field == c.field);
        CHECK(error.text().find(c.says) != std::string::npos);
    }
}
