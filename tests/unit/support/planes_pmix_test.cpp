// SPDX-License-Identifier: LGPL-2.1-or-later
// PMIx values to allocations without a launcher: every form the reader accepts (RFC0030 data
// array, pnet/tcp prototype, bare string), and a table of values that must be refused with the
// field they get wrong. The libpmix half is covered by tests/integration/pmix.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/planes/pmix_allocation.hpp"
#include "support/planes/pmix_value.hpp"

using namespace bmi::support::planes;

namespace {
PmixValue array(std::vector<PmixItem> items) {
    return {PmixScalar{std::string()}, std::move(items)};
}
PmixValue bare(std::string s) { return {PmixScalar{std::move(s)}, std::nullopt}; }
PmixBytes key_of(std::size_t n, std::uint8_t fill) { return PmixBytes(n, fill); }

// The form the fake RM and pmix.md §4 use: resources under the id, the rest under pmix.alloc.*.
std::vector<PmixItem> rfc_items(const std::string& id) {
    return {{"pmix.alloc.netid", std::string(id)},
            {id, std::string("32000-32010,33005")},
            {"pmix.alloc.nettype", std::string("tcp")},
            {"pmix.alloc.netplane", std::string("127.0.0.0/8")},
            {"pmix.alloc.endpts", std::uint64_t{2}},
            {"pmix.alloc.netqos", std::string("cs1")},
            {"pmix.alloc.bw", 200.5},
            {"pmix.alloc.nsec", key_of(32, 0xa5)},
            {"rm.private.extra", PmixOtherType{"PMIX_POINTER"}}};
}

std::string refusal(const PmixValue& v, std::uint32_t local_size = 1) {
    std::string field, message;
    const auto c = convert_pmix_value("bmi.t", v, local_size, field, message);
    return c ? "accepted: " + c->text : field;
}
}  // namespace

TEST_CASE("an RFC0030 data array becomes one allocation with its key", "[planes][pmix]") {
    std::string field, message;
    const auto c = convert_pmix_value("bmi.t", array(rfc_items("bmi.t")), 4, field, message);
    REQUIRE(c);
    CHECK(c->text ==
          "id=bmi.t type=tcp plane=127.0.0.0/8 endpts=2 ports=32000-32010,33005 qos=cs1 bw=200.5");
    CHECK(c->key == key_of(32, 0xa5));
}

TEST_CASE("the pnet/tcp prototype keeps type and plane under the id", "[planes][pmix]") {
    const PmixValue v = array({{"pmix.alloc.netid", std::string("bmi.t")},
                               {"bmi.t", std::string("40001,40002,40003,40004")},
                               {"bmi.t", std::string("tcp")},
                               {"bmi.t", std::string("127.0.0.0/8")}});
    std::string field, message;
    // No count: the four ports are the node's, shared by two local processes.
    const auto c = convert_pmix_value("bmi.t", v, 2, field, message);
    REQUIRE(c);
    CHECK(c->text == "id=bmi.t type=tcp plane=127.0.0.0/8 endpts=2 ports=40001,40002,40003,40004");
    CHECK(c->key.empty());
}

TEST_CASE("a bare string is tcp resources on every address", "[planes][pmix]") {
    std::string field, message;
    const auto c = convert_pmix_value("bmi.t", bare("40000-40010"), 3, field, message);
    REQUIRE(c);
    CHECK(c->text == "id=bmi.t type=tcp plane=0.0.0.0/0 endpts=1 ports=40000-40010");
}

TEST_CASE("endpts.nd is split among the local processes when endpts is absent", "[planes][pmix]") {
    auto items = rfc_items("bmi.t");
    items[4] = {"pmix.alloc.endpts.nd", std::uint64_t{6}};
    CHECK(refusal(array(items), 3).find(" endpts=2 ") != std::string::npos);
    CHECK(refusal(array(items), 7) == "endpts");
    items.push_back({"pmix.alloc.endpts", std::uint64_t{5}});  // endpts wins over endpts.nd
    CHECK(refusal(array(items), 3).find(" endpts=5 ") != std::string::npos);
}

TEST_CASE("values the reader refuses name their field", "[planes][pmix]") {
    const auto without = [](const std::string& key) {
        auto items = rfc_items("bmi.t");
        std::erase_if(items, [&](const PmixItem& i) { return i.key == key; });
        return array(items);
    };
    const auto with = [](const std::string& key, PmixScalar v) {
        auto items = rfc_items("bmi.t");
        for (PmixItem& i : items)
            if (i.key == key) i.value = std::move(v);
        return array(items);
    };
    CHECK(refusal(without("pmix.alloc.nettype")) == "type");
    CHECK(refusal(without("pmix.alloc.netplane")) == "plane");
    CHECK(refusal(without("bmi.t")) == "ports");
    CHECK(refusal(without("pmix.alloc.endpts")) == "endpts");
    CHECK(refusal(with("pmix.alloc.endpts", std::string("2"))) == "endpts");
    CHECK(refusal(with("pmix.alloc.bw", std::string("200"))) == "bw");
    CHECK(refusal(with("pmix.alloc.nsec", key_of(15, 1))) == "key");
    CHECK(refusal(with("pmix.alloc.nsec", key_of(65, 1))) == "key");
    CHECK(refusal(with("pmix.alloc.nsec", std::string("secret"))) == "key");
    // A value that would smuggle another field, or another entry, into the text.
    CHECK(refusal(with("bmi.t", std::string("32000 key_file=/etc/shadow"))) == "ports");
    CHECK(refusal(with("pmix.alloc.netqos", std::string("a;id=bmi.u"))) == "qos");
    CHECK(refusal(bare("")) == "ports");
    CHECK(refusal(PmixValue{PmixScalar{std::uint64_t{3}}, std::nullopt}) == "id");
    auto twice = rfc_items("bmi.t");
    twice.push_back({"bmi.t", std::string("tcp")});  // prototype type and nettype both
    CHECK(refusal(array(twice)) == "type");
    auto two_counts = rfc_items("bmi.t");
    two_counts.push_back({"pmix.alloc.endpts", std::uint64_t{1}});
    CHECK(refusal(array(two_counts)) == "endpts");
}

TEST_CASE("the text is parsed strictly and keys must agree", "[planes][pmix]") {
    const std::vector<std::string> ids{"bmi.a", "bmi.b"};
    std::vector<PmixValue> values{array(rfc_items("bmi.a")), array(rfc_items("bmi.b"))};
    PmixAllocations out;
    std::string note;
    REQUIRE(allocations_from_pmix("job1", ids, values, 1, out, note) == PmixStatus::found);
    CHECK(note == "PMIx job1: read bmi.a, bmi.b");
    REQUIRE(out.entries.size() == 2);
    CHECK(out.entries[1].id == "bmi.b");
    CHECK(out.entries[0].ports.text() == "32000-32010,33005");
    CHECK(out.entries[0].bandwidth_mbps == 200.5);
    CHECK(out.key.size() == 32);

    auto bad_range = rfc_items("bmi.b");
    bad_range[1].value = std::string("32010-32000");
    values[1] = array(bad_range);
    PmixAllocations untouched;
    CHECK(allocations_from_pmix("job1", ids, values, 1, untouched, note) == PmixStatus::malformed);
    CHECK(note.rfind("PMIx job1 bmi.b:1: ports: ", 0) == 0);
    CHECK(untouched.entries.empty());

    auto other_key = rfc_items("bmi.b");
    other_key[7].value = key_of(32, 0x5a);
    values[1] = array(other_key);
    CHECK(allocations_from_pmix("job1", ids, values, 1, out, note) == PmixStatus::malformed);
    CHECK(note.find("one instance holds one key") != std::string::npos);
    CHECK(note.find("\xa5") == std::string::npos);

    const std::vector<std::string> reserved{"pmix.mine"};
    const std::vector<PmixValue> one{bare("40000")};
    CHECK(allocations_from_pmix("job1", reserved, one, 1, out, note) == PmixStatus::malformed);
    CHECK(note.find(": id: ") != std::string::npos);
}
