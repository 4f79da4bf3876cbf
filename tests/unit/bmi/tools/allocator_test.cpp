// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocator: disjoint ports, real key files, required values held or refused by name,
// unrequired ones degraded and said so.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <bitset>
#include <string>

#include "../../key_files.hpp"
#include "bmi/tools/allocator.hpp"
#include "support/keys/secret_key.hpp"

using namespace bmi::support::planes;
using bmi::test::KeyFiles;
using bmi::tools::AllocationOutcome;
using bmi::tools::Allocator;

namespace {
Inventory inventory(const char* text) {
    ParseError error;
    auto inv = parse_inventory(text, "inv", error);
    INFO(error.text());
    REQUIRE(inv);
    return std::move(*inv);
}

RequestEntry request(const std::string& text) {
    ParseError error;
    auto reqs = parse_requests(text, "req", error);
    INFO(error.text());
    REQUIRE(reqs);
    return reqs->front();
}
}  // namespace

TEST_CASE("a thousand requests never share a port on a plane", "[allocator]") {
    Allocator allocator(inventory("a = tcp 10.1.0.0/16 ports=20000-29999\n"
                                  "b = tcp 10.2.0.0/16 ports=20000-24999,26000-27999\n"),
                        "");
    std::bitset<65536> used_a, used_b;
    std::size_t granted = 0;
    for (int i = 0; i < 1000; ++i) {
        const std::string plane = i % 2 == 0 ? "a" : "b";
        const auto out = allocator.allocate(
            request("id=r" + std::to_string(i) + " type=tcp endpts=" + std::to_string(1 + i % 9) +
                    "! plane=" + plane + "!"));
        REQUIRE(out.allocation);
        const Allocation& a = *out.allocation;
        CHECK(a.ports.count() == a.endpoints);
        std::bitset<65536>& used = plane == "a" ? used_a : used_b;
        for (const PortRange& r : a.ports.ranges())
            for (unsigned p = r.first; p <= r.last; ++p) {
                REQUIRE_FALSE(used[p]);
                used[p] = true;
                REQUIRE((plane == "a"
                             ? (p >= 20000 && p <= 29999)
                             : ((p >= 20000 && p <= 24999) || (p >= 26000 && p <= 27999))));
                ++granted;
            }
    }
    CHECK(granted == used_a.count() + used_b.count());
}

TEST_CASE("required values are held or the request fails naming the value", "[allocator]") {
    KeyFiles keys;
    Allocator allocator(inventory("s = tcp 10.1.0.0/16 ports=5000-5003 bw=1000 qos=bulk\n"
                                  "t = tcp 10.3.0.0/16 ports=6000\n"),
                        keys.dir());
    struct Case {
        const char* text;
        const char* says;
    };
    const Case cases[] = {
        {"id=x type=verbs endpts=1", "type: the inventory has no verbs plane"},
        {"id=x type=tcp endpts=1 plane=nowhere!",
         "plane: the inventory has no tcp plane 'nowhere'"},
        {"id=x type=tcp endpts=5! plane=s!",
         "endpts: plane s has 4 free port(s), 5 asked and required"},
        {"id=x type=tcp endpts=1 plane=s qos=fast!", "qos: plane s does not offer 'fast'"},
        {"id=x type=tcp endpts=1 plane=s bw=2000!",
         "bw: plane s has 1000 Mbit/s free, 2000 required"},
    };
    for (const Case& c : cases) {
        INFO(c.text);
        const AllocationOutcome out = allocator.allocate(request(c.text));
        CHECK_FALSE(out.allocation);
        CHECK(out.error == c.says);
    }
    // Refused requests took nothing: all four ports and the whole bandwidth are still there.
    const auto all =
        allocator.allocate(request("id=y type=tcp endpts=4! plane=s! bw=1000! qos=bulk! key=yes!"));
    REQUIRE(all.allocation);
    CHECK(all.allocation->ports.text() == "5000-5003");
    CHECK(all.allocation->bandwidth_mbps == 1000);
    CHECK(all.allocation->qos == "bulk");
    CHECK(all.degradations.empty());
    // The key file is private and is a key support/keys accepts.
    struct stat st {};
    REQUIRE(stat(all.allocation->key_file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    bmi::support::keys::SharedKey key;
    CHECK(bmi::support::keys::load_key_file(all.allocation->key_file, key) == 0);
    // The same id twice would reuse the key file name: refused, never overwritten.
    const auto again = allocator.allocate(request("id=y type=tcp endpts=1 plane=t key=yes!"));
    CHECK_FALSE(again.allocation);
    CHECK(again.error.rfind("key: ", 0) == 0);
}

TEST_CASE("unrequired values are degraded and reported", "[allocator]") {
    Allocator allocator(inventory("s = tcp 10.1.0.0/16 ports=5000-5002 bw=100\n"
                                  "t = tcp 10.3.0.0/16 ports=6000-6009\n"
                                  "n = shm node1\n"),
                        "");
    auto out =
        allocator.allocate(request("id=a type=tcp endpts=2 plane=s bw=300 qos=fast key=yes"));
    REQUIRE(out.allocation);
    const Allocation& a = *out.allocation;
    CHECK(a.plane == "10.1.0.0/16");
    CHECK(a.bandwidth_mbps == 100);
    CHECK(a.qos.empty());
    CHECK(a.key_file.empty());
    CHECK(a.degraded == std::vector<std::string>{"qos", "bw", "key"});
    CHECK(out.degradations.size() == 3);
    CHECK(out.degradations[1] == "bw: asked 300 Mbit/s, granted 100");
    // Plane s has one port left: an unrequired plane moves to t, whose pool has room.
    out = allocator.allocate(request("id=b type=tcp endpts=4 plane=s"));
    REQUIRE(out.allocation);
    CHECK(out.allocation->plane == "10.3.0.0/16");
    CHECK(out.allocation->degraded == std::vector<std::string>{"plane"});
    // More endpoints than any plane has: granted what the roomiest plane holds.
    out = allocator.allocate(request("id=c type=tcp endpts=50"));
    REQUIRE(out.allocation);
    CHECK(out.allocation->endpoints == 6);
    CHECK(out.allocation->degraded == std::vector<std::string>{"endpts"});
    CHECK(out.degradations.front() == "endpts: asked 50, granted 6");
    // shm and verbs endpoints are not drawn from a pool.
    out = allocator.allocate(request("id=d type=shm endpts=3"));
    REQUIRE(out.allocation);
    CHECK(out.allocation->endpoints == 3);
    CHECK(out.allocation->ports.empty());
}
