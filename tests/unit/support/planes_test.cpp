// SPDX-License-Identifier: LGPL-2.1-or-later
// Planes: identifiers, CIDRs, the inventory file, and discovery on this machine's loopback.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "support/planes/cidr.hpp"
#include "support/planes/discovery.hpp"
#include "support/planes/inventory.hpp"
#include "support/planes/plane.hpp"

using namespace bmi::support::planes;

TEST_CASE("plane identifiers are checked and written one way", "[planes]") {
    std::string why;
    CHECK(canonical_identifier(PlaneType::tcp, "10.20.0.0/16", why) == "10.20.0.0/16");
    CHECK(canonical_identifier(PlaneType::tcp, "FD00:1::/64", why) == "fd00:1::/64");
    CHECK(canonical_identifier(PlaneType::verbs, "mlx5_0:1", why) == "mlx5_0:1");
    CHECK(canonical_identifier(PlaneType::verbs, "mlx5_0", why) == "mlx5_0");
    CHECK(canonical_identifier(PlaneType::verbs, "fe80::/64", why) == "fe80::/64");
    CHECK(canonical_identifier(PlaneType::shm, "node7", why) == "node7");
    CHECK(canonical_identifier(PlaneType::ofi, "tcp", why) == "tcp");
    CHECK(canonical_identifier(PlaneType::ofi, "CXI/cxi0", why) == "cxi/cxi0");
    CHECK(canonical_identifier(PlaneType::ofi, "verbs/mlx5_0", why) == "verbs/mlx5_0");

    CHECK_FALSE(canonical_identifier(PlaneType::tcp, "10.20.1.0/16", why));
    CHECK(why.find("host bits") != std::string::npos);
    CHECK(why.find("10.20.0.0/16") != std::string::npos);
    CHECK_FALSE(canonical_identifier(PlaneType::tcp, "10.20.0.0", why));
    CHECK_FALSE(canonical_identifier(PlaneType::tcp, "10.20.0.0/33", why));
    CHECK_FALSE(canonical_identifier(PlaneType::tcp, "10.20.0/16", why));
    CHECK_FALSE(canonical_identifier(PlaneType::verbs, "mlx5_0:0", why));
    CHECK_FALSE(canonical_identifier(PlaneType::verbs, "mlx5_0:x", why));
    CHECK_FALSE(canonical_identifier(PlaneType::verbs, "10.0.0.0/8", why));
    CHECK_FALSE(canonical_identifier(PlaneType::shm, "no de", why));
    CHECK_FALSE(canonical_identifier(PlaneType::ofi, "tcp;ofi_rxm", why));
    CHECK(why.find("not a libfabric provider name") != std::string::npos);
    CHECK_FALSE(canonical_identifier(PlaneType::ofi, "verbs/", why));
    CHECK_FALSE(canonical_identifier(PlaneType::ofi, "verbs/a/b", why));
    CHECK(why.find("not a libfabric domain name") != std::string::npos);
    CHECK_FALSE(canonical_identifier(PlaneType::ofi, "", why));
}

TEST_CASE("a subnet contains the addresses inside it", "[planes]") {
    std::string why;
    const auto net = parse_cidr("10.20.0.0/16", why);
    REQUIRE(net);
    CHECK(net->contains(*parse_cidr("10.20.3.4/32", why)));
    CHECK_FALSE(net->contains(*parse_cidr("10.21.0.0/32", why)));
    CHECK_FALSE(net->contains(*parse_cidr("::1/128", why)));
}

TEST_CASE("an inventory names and pins planes", "[planes][inventory]") {
    const char* text = "# the cluster's planes\n"
                       "storage = tcp 10.20.0.0/16 ports=32000-32999 bw=10000 qos=bulk,fast\n"
                       "\n"
                       "fabric  = verbs mlx5_0:1   # the IB rail\n"
                       "local = shm node7\n";
    ParseError error;
    const auto inv = parse_inventory(text, "/etc/bmi/planes", error);
    REQUIRE(inv);
    REQUIRE(inv->planes.size() == 3);
    const InventoryPlane* storage = inv->find("storage");
    REQUIRE(storage != nullptr);
    CHECK(storage->plane.type == PlaneType::tcp);
    CHECK(storage->plane.identifier == "10.20.0.0/16");
    CHECK(storage->plane.origin == "inventory /etc/bmi/planes:2");
    CHECK(storage->ports.count() == 1000);
    CHECK(storage->bandwidth_mbps == 10000);
    CHECK(storage->qos == std::vector<std::string>{"bulk", "fast"});
    CHECK(inv->find("10.20.0.0/16") == storage);
    CHECK(inv->find("mlx5_0:1")->plane.name == "fabric");
    CHECK(inv->find("nothing") == nullptr);
}

TEST_CASE("a malformed inventory line names the file, the line and the field",
          "[planes][inventory]") {
    struct Case {
        const char* line;
        const char* field;
        const char* says;
    };
    const Case cases[] = {
        {"storage tcp 10.20.0.0/16", "", "expected 'name = type identifier"},
        {"storage = tcp", "", "expected"},
        {"st/rage = tcp 10.20.0.0/16", "name", "not a name"},
        {"storage = udp 10.20.0.0/16", "type", "not tcp, shm, verbs or ofi"},
        {"storage = tcp 10.20.1.0/16", "identifier", "host bits"},
        {"storage = tcp 10.20.0.0/16 ports=70000", "ports", "not a port"},
        {"storage = tcp 10.20.0.0/16 ports=2-1", "ports", "backwards"},
        {"storage = tcp 10.20.0.0/16 ports=1-5,3", "ports", "listed twice"},
        {"storage = tcp 10.20.0.0/16 ports=1 ports=2", "ports", "given twice"},
        {"storage = tcp 10.20.0.0/16 bw=fast", "bw", "not a bandwidth"},
        {"storage = tcp 10.20.0.0/16 bw=-5", "bw", "not a bandwidth"},
        {"storage = tcp 10.20.0.0/16 qos=a,,b", "qos", "not a QoS level"},
        {"storage = tcp 10.20.0.0/16 colour=red", "colour", "unknown field"},
        {"storage = tcp 10.20.0.0/16 ports", "ports", "not key=value"},
        {"storage = tcp 10.20.0.0/16 ports=", "ports", "no value"},
        {"storage = tcp 10.20.0.0/16 bw=5!", "bw", "belongs in requests"},
        {"fabric = verbs mlx5_0:1 ports=1", "ports", "only tcp"},
    };
    for (const Case& c : cases) {
        INFO(c.line);
        ParseError error;
        const std::string text = std::string("ok = shm node1\n") + c.line + "\n";
        CHECK_FALSE(parse_inventory(text, "inv.txt", error));
        CHECK(error.source == "inv.txt");
        CHECK(error.line == 2);
        CHECK(error.field == c.field);
        CHECK(error.text().find(c.says) != std::string::npos);
    }
    ParseError error;
    CHECK_FALSE(parse_inventory("a = shm n1\na = shm n2\n", "f", error));
    CHECK(error.text() == "f:2: name: 'a' is named twice");
    CHECK_FALSE(parse_inventory("a = shm n1\nb = shm n1\n", "f", error));
    CHECK(error.field == "identifier");
}

TEST_CASE("discovery sees the loopback subnet and this node", "[planes][discovery]") {
    const std::vector<Plane> planes = discover_planes();
    const auto has = [&](PlaneType type, const std::string& id) {
        return std::any_of(planes.begin(), planes.end(),
                           [&](const Plane& p) { return p.type == type && p.identifier == id; });
    };
    CHECK(has(PlaneType::tcp, "127.0.0.0/8"));
    const auto lo = std::find_if(planes.begin(), planes.end(),
                                 [](const Plane& p) { return p.identifier == "127.0.0.0/8"; });
    REQUIRE(lo != planes.end());
    CHECK(lo->origin == "interface lo");
    CHECK(std::count_if(planes.begin(), planes.end(),
                        [](const Plane& p) { return p.type == PlaneType::shm; }) == 1);
    // Each plane once, however many interfaces share its subnet.
    for (const Plane& p : planes)
        CHECK(std::count_if(planes.begin(), planes.end(), [&](const Plane& q) {
                  return q.type == p.type && q.identifier == p.identifier;
              }) == 1);
}
