// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: settings are read strictly when BMI_initialize runs, from the environment and
// the option string, and a client's options reach the method it starts at its first lookup.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

#include "bmi.h"
#include "harness.hpp"
#include "methods/method_table.hpp"
#include "methods/ofi/ofi_settings.hpp"
#include "methods/shm/shm_settings.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "methods/verbs/verbs_settings.hpp"
#include "support/settings/settings.hpp"
#include "tests/captured_stderr.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
// BMI_initialize as a client of every method with these options; finalizes what it started.
int initialize_with(const char* options, std::string& log) {
    std::string text = options;
    CapturedStderr captured;
    const int rc = BMI_initialize(nullptr, nullptr, 0, text.data());
    log = captured.stop();
    if (rc == 0) BMI_finalize();
    return rc;
}
}  // namespace

TEST_CASE("the table gathers support's rows, then each method's, in method-table order",
          "[settings]") {
    const support::SettingTable& table = method::all_settings();
    std::vector<const support::SettingSpec*> expected;
    for (auto block :
         {support::general_setting_rows(), method::tcp::setting_rows(), method::shm::setting_rows(),
          method::verbs::setting_rows(), method::ofi::setting_rows()})
        for (const auto& row : block) expected.push_back(&row);
    REQUIRE(table.size() == expected.size());
    std::set<std::string_view> keys;
    const support::Settings defaults(table);
    std::size_t i = 0;
    for (const auto& spec : table.rows()) {
        INFO(spec.env);
        CHECK(&spec == expected[i++]);
        CHECK(keys.insert(spec.key).second);
        CHECK(table.find(spec.key) == &spec);
        // The option key is the variable without BMI_, in lower case; a method's starts with
        // its scheme (bmi-info lists a method's settings by it).
        std::string key;
        for (char c : spec.env.substr(4))
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        CHECK(spec.env.substr(0, 4) == "BMI_");
        CHECK(key == spec.key);
        CHECK_FALSE(spec.meaning.empty());
        if (spec.type != support::SettingType::text) {
            auto value = support::parse_setting(spec, spec.default_text);
            REQUIRE(value);
            CHECK(support::parse_setting(spec, defaults.shown(spec)) == value);
        }
        if (spec.type == support::SettingType::size ||
            spec.type == support::SettingType::duration || spec.type == support::SettingType::count)
            CHECK(spec.min <= spec.max);
    }
    // A former name is no row's current name, nor another row's former one: each reads as
    // exactly one setting.
    std::set<std::string> formers;
    for (const auto& spec : table.rows())
        for (std::string_view former : support::former_names(spec)) {
            INFO(former);
            CHECK(former.substr(0, 4) == "BMI_");
            CHECK(table.find(support::option_key(former)) == nullptr);
            CHECK(formers.insert(support::option_key(former)).second);
        }
    for (auto [rows, scheme] : {std::pair{method::tcp::setting_rows(), "tcp_"},
                                {method::shm::setting_rows(), "shm_"},
                                {method::verbs::setting_rows(), "verbs_"}})
        for (const auto& row : rows) CHECK(row.key.starts_with(scheme));
}

TEST_CASE("a malformed environment variable fails BMI_initialize and names itself", "[settings]") {
    setenv("BMI_TCP_SPIN_US", "abc", 1);  // quietly 0 before the table
    std::string log;
    const int rc = initialize_with("", log);
    unsetenv("BMI_TCP_SPIN_US");
    INFO(log);
    CHECK(rc == -BMI_EINVAL);
    CHECK(log.find("BMI_TCP_SPIN_US (environment; option tcp_spin_us) = \"abc\" is not valid: "
                   "expected a whole number from 0 to 10000") != std::string::npos);
}

TEST_CASE("the methods' former setting names still initialize, and disagreeing ones do not",
          "[settings]") {
    setenv("BMI_SHM_EARLY_BYTES", "1M", 1);
    setenv("BMI_VERBS_CONNECT_TIMEOUT_MS", "3s", 1);
    support::Settings settings(method::all_settings());
    CapturedStderr captured;
    CHECK(settings.load("shm_connect_timeout_ms=2s") == 0);
    std::string log;
    CHECK(initialize_with("", log) == 0);
    setenv("BMI_SHM_EARLY_PEER_BYTES", "2M", 1);  // now both names, with different values
    std::string refused;
    CHECK(initialize_with("", refused) == -BMI_EINVAL);
    unsetenv("BMI_SHM_EARLY_BYTES");
    unsetenv("BMI_VERBS_CONNECT_TIMEOUT_MS");
    unsetenv("BMI_SHM_EARLY_PEER_BYTES");
    log += captured.stop();
    INFO(log << refused);
    CHECK(settings.number(method::shm::SettingId::early_peer_bytes) == 1 << 20);
    CHECK(settings.duration(method::verbs::SettingId::setup_timeout).count() == 3000);
    CHECK(settings.duration(method::shm::SettingId::setup_timeout).count() == 2000);
    CHECK(log.find("BMI_SHM_EARLY_BYTES is the former name of BMI_SHM_EARLY_PEER_BYTES") !=
          std::string::npos);
    CHECK(log.find("option shm_connect_timeout_ms is the former name of shm_setup_timeout_ms") !=
          std::string::npos);
    CHECK(refused.find("BMI_SHM_EARLY_PEER_BYTES = \"2M\" and BMI_SHM_EARLY_BYTES = \"1M\"") !=
          std::string::npos);
}

TEST_CASE("a malformed option fails BMI_initialize and names itself", "[settings]") {
    std::string log;
    const int rc = initialize_with("unexpected_quota=1GB", log);  // quietly 64 MiB before
    INFO(log);
    CHECK(rc == -BMI_EINVAL);
    CHECK(log.find("BMI_UNEXPECTED_QUOTA (BMI_initialize option unexpected_quota) = \"1GB\" is "
                   "not valid: expected a size from 0 to 1024G bytes") != std::string::npos);
}

TEST_CASE("sizes take suffixes and the option string wins over the environment", "[settings]") {
    setenv("BMI_UNEXPECTED_QUOTA", "2M", 1);
    char options[] = "unexpected_quota=1GiB";
    const int rc = BMI_initialize(nullptr, nullptr, 0, options);
    unsetenv("BMI_UNEXPECTED_QUOTA");
    REQUIRE(rc == 0);
    BMI_unexpected_quota_use use{};
    CHECK(BMI_get_info(0, BMI_UNEXPECTED_QUOTA_USE, &use) == 0);
    CHECK(use.limit == 1ll << 30);
    BMI_finalize();
}

TEST_CASE("a client's shm options reach the shm method it starts at its first lookup",
          "[settings][shm]") {
    if (method::find_method("bmi_shm") == nullptr) {
        SUCCEED("shm is not compiled in");
        return;
    }
    // 16 slots of 512 bytes: half a ring is 4 KiB, so unexpected messages are capped below
    // 4 KiB instead of the default 16 KiB. make_peers gives the options to both instances;
    // the client starts shm lazily, at its lookup of the server.
    Pair pair = make_peers("shm", "shm_ring_slots=16,shm_slot_size=512");
    int limit = 0;
    REQUIRE(pair.client.instance->get_info(pair.server_addr, BMI_GET_UNEXP_SIZE, &limit) == 0);
    CHECK(limit > 0);
    CHECK(limit < 4096);
}
