// SPDX-License-Identifier: LGPL-2.1-or-later
// OrangeFS's names for the verbs method (methods/method_table.hpp): "bmi_ib" in method lists
// and "ib://host:port" addresses reach verbs under its own name; without verbs, neither exists.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "bmi-types.h"
#include "bmi/core/address_choice.hpp"
#include "bmi/core/instance.hpp"
#include "methods/method_table.hpp"

using namespace bmi;

namespace {
bool verbs_compiled() { return method::find_method("bmi_verbs") != nullptr; }
}  // namespace

TEST_CASE("bmi_ib and ib:// name the verbs method", "[alias]") {
    if (!verbs_compiled()) {
        CHECK(method::find_method("bmi_ib") == nullptr);
        CHECK(method::find_method("ib") == nullptr);
        CHECK(method::canonical_address("ib://h:1") == "ib://h:1");
        return;
    }
    const method::Descriptor* verbs = method::find_method("bmi_verbs");
    CHECK(method::find_method("bmi_ib") == verbs);
    CHECK(method::find_method("ib") == verbs);
    CHECK(method::canonical_scheme("ib") == "verbs");
    CHECK(method::canonical_scheme("tcp") == "tcp");
    CHECK(method::canonical_address("ib://node1:3335") == "verbs://node1:3335");
    CHECK(method::canonical_address("ib://[::1]:3335") == "verbs://[::1]:3335");
    CHECK(method::canonical_address("tcp://node1:3334") == "tcp://node1:3334");
    CHECK(method::canonical_address("verbs://n:1") == "verbs://n:1");
    CHECK(method::canonical_address("not an address") == "not an address");
    // Only the exact alias: "ibx" or "bmi_ibv" are not verbs.
    CHECK(method::find_method("ibx") == nullptr);
    CHECK(method::find_method("bmi_ibv") == nullptr);
}

TEST_CASE("an address list ranks ib:// as verbs://", "[alias]") {
    if (!verbs_compiled()) return;
    auto usable = [](std::string_view scheme) { return method::find_method(scheme) != nullptr; };
    auto local = [](std::string_view) { return false; };
    CHECK(core::choose_address("tcp://node2:3334,ib://node2:3335", usable, local).part ==
          "ib://node2:3335");
    CHECK(core::choose_address("ib://node2:3335,tcp://node2:3334", usable, local).part ==
          "ib://node2:3335");
}

TEST_CASE("BMI_initialize takes bmi_ib in either dialect", "[alias]") {
    for (auto dialect : {method::ApiDialect::orangefs, method::ApiDialect::standalone}) {
        core::InitParams params;
        params.method_list = "bmi_ib";
        params.dialect = dialect;
        std::unique_ptr<core::Instance> instance;
        const int rc = core::Instance::create(params, instance);
        if (!verbs_compiled()) {
            CHECK(rc == -BMI_ENOPROTOOPT);
            continue;
        }
        REQUIRE(rc == 0);
        // Only verbs is allowed: tcp is refused, an ib:// address is verbs's to answer (a
        // malformed one is refused as malformed, not as an unknown method).
        BMI_addr_t addr = 0;
        CHECK(instance->addr_lookup("tcp://127.0.0.1:3334", addr) == -BMI_ENOPROTOOPT);
        CHECK(instance->addr_lookup("ib://no-port-here", addr) != -BMI_ENOPROTOOPT);
    }
}
