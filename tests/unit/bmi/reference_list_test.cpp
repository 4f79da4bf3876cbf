// SPDX-License-Identifier: LGPL-2.1-or-later
// The address reference list: handles, string lookups, stale handles after erase.
#include <catch2/catch.hpp>

#include "bmi/core/reference_list.hpp"

using namespace bmi;

namespace {
class PlainPeer final : public method::Peer {};
}  // namespace

TEST_CASE("reference list maps strings and handles both ways") {
    core::ReferenceList list;
    auto peer = std::make_shared<PlainPeer>();
    auto& entry = list.add(0, peer, "tcp://a:1");
    REQUIRE(entry.addr > 0);
    REQUIRE(peer->addr() == entry.addr);
    REQUIRE(list.find(entry.addr) == &entry);
    REQUIRE(list.find_by_string("tcp://a:1") == &entry);
    REQUIRE(list.find_by_string("tcp://a:2") == nullptr);

    auto anonymous = std::make_shared<PlainPeer>();
    auto& second = list.add(0, anonymous, "");
    REQUIRE(second.addr != entry.addr);
    REQUIRE(list.size() == 2);

    BMI_addr_t old = entry.addr;
    list.erase(old);
    REQUIRE(list.find(old) == nullptr);
    REQUIRE(list.find_by_string("tcp://a:1") == nullptr);
    REQUIRE(peer->addr() == 0);  // the peer no longer claims a dead handle
    // A new entry never revives the old handle.
    auto& third = list.add(0, std::make_shared<PlainPeer>(), "tcp://a:1");
    REQUIRE(third.addr != old);
    list.erase(12345);  // unknown: ignored
    REQUIRE(list.size() == 2);
}
