// SPDX-License-Identifier: LGPL-2.1-or-later
// Which part of an address list a lookup uses (bmi/core/address_choice.hpp): the preferred
// usable method, shared memory only for a peer on this node, and clear errors otherwise.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "bmi-types.h"
#include "bmi/core/address_choice.hpp"

using bmi::core::choose_address;

namespace {

struct Process {
    std::set<std::string, std::less<>> methods{"tcp", "shm", "verbs"};
    std::set<std::string, std::less<>> local_hosts{"127.0.0.1", "node1"};
    std::vector<std::string> resolved;  // hosts asked about, in order

    bmi::core::AddressChoice choose(std::string_view list) {
        return choose_address(
            list, [&](std::string_view scheme) { return methods.count(scheme) != 0; },
            [&](std::string_view host) {
                resolved.emplace_back(host);
                return local_hosts.count(host) != 0;
            });
    }
};

}  // namespace

TEST_CASE("address lists: shm for a peer on this node, then verbs, then tcp", "[address]") {
    Process p;
    CHECK(p.choose("tcp://node1:3334,shm://srv").part == "shm://srv");
    CHECK(p.choose("shm://srv , tcp://127.0.0.1:3334").part == "shm://srv");
    CHECK(p.choose("tcp://node1:3334,verbs://node1:3335").part == "verbs://node1:3335");
    CHECK(p.choose("tcp://node1:3334,verbs://node1:3335,shm://srv").part == "shm://srv");
    // Another node's list: its shm name may be a different server here.
    CHECK(p.choose("tcp://node2:3334,shm://srv").part == "tcp://node2:3334");
    CHECK(p.choose("verbs://node2:3335,shm://srv,tcp://node2:3334").part == "verbs://node2:3335");
    // Only shm named: nothing says where, and shm names are this node's.
    CHECK(p.choose("shm://a,shm://b").part == "shm://a");
}

TEST_CASE("address lists: parts this process cannot use are passed over", "[address]") {
    Process p;
    p.methods = {"tcp"};
    CHECK(p.choose("tcp://node1:3334,shm://srv").part == "tcp://node1:3334");
    CHECK(p.choose("ib://node1:3335,tcp://node1:3334").part == "tcp://node1:3334");
    const auto none = p.choose("shm://srv,gm://x");
    CHECK(none.part.empty());
    CHECK(none.error == -BMI_ENOPROTOOPT);
    // A tcp part this process cannot use still says the peer is elsewhere.
    p.methods = {"shm"};
    CHECK(p.choose("tcp://node2:3334,shm://srv").error == -BMI_ENOPROTOOPT);
}

TEST_CASE("address lists: a malformed or empty list is -BMI_EINVAL", "[address]") {
    Process p;
    CHECK(p.choose("tcp://node1:3334,nonsense").error == -BMI_EINVAL);
    CHECK(p.choose(" , ").error == -BMI_EINVAL);
    CHECK(p.choose("").error == -BMI_EINVAL);
}

TEST_CASE("address lists: the resolver is asked only when it decides", "[address]") {
    Process p;
    CHECK(p.choose("tcp://node2:3334,verbs://node2:3335").part == "verbs://node2:3335");
    CHECK(p.resolved.empty());  // no shm part: where the peer is does not matter
    CHECK(p.choose("tcp://node1:3334,tcp://node2:3334,shm://srv").part == "shm://srv");
    CHECK(p.resolved == std::vector<std::string>{"node1"});  // the first local host decides
}

TEST_CASE("address lists: a fabric's own address is not taken for shared memory", "[address]") {
    Process p;
    p.methods = {"ofi", "shm"};
    // Another node's server: its ofi+efa part reaches it there; its shm name would not.
    CHECK(p.choose("tcp://node2:3334,ofi+efa://0x0a0b,shm://srv").part == "ofi+efa://0x0a0b");
    // ofi's shared memory is this node's, as shm is.
    CHECK(p.choose("tcp://node2:3334,ofi+shm://srv").error == -BMI_ENOPROTOOPT);
    CHECK(p.choose("tcp://node1:3334,ofi+shm://srv").part == "ofi+shm://srv");
}
