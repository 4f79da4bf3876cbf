// SPDX-License-Identifier: LGPL-2.1-or-later
// The settings table and its strict reader: every row is well formed and parses its own
// default, the environment overrides the default and the option string the environment, and
// a bad value or key is refused with a warning that names it.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <string>

#include "bmi-types.h"
#include "support/settings/settings.hpp"
#include "tests/captured_stderr.hpp"

using namespace bmi::support;
using bmi::test::CapturedStderr;

namespace {
std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}
}  // namespace

TEST_CASE("every row of the table is complete and parses its own default", "[settings]") {
    for (const auto& spec : setting_table()) {
        INFO(spec.env);
        CHECK(&setting_spec(spec.id) == &spec);
        CHECK(find_setting(spec.key) == &spec);
        // The option key is the variable without BMI_, in lower case.
        CHECK(spec.env.substr(0, 4) == "BMI_");
        CHECK(lower(spec.env.substr(4)) == spec.key);
        CHECK_FALSE(spec.meaning.empty());
        if (spec.type != SettingType::text) {
            auto value = parse_setting(spec, spec.default_text);
            REQUIRE(value);
            // The value shown for the default reads back as the same value.
            CHECK(parse_setting(spec, Settings{}.shown(spec.id)) == value);
        }
        if (spec.type == SettingType::size || spec.type == SettingType::duration ||
            spec.type == SettingType::count)
            CHECK(spec.min <= spec.max);
    }
}

TEST_CASE("values are parsed in the row's type and bounded by its range", "[settings]") {
    const auto& quota = setting_spec(SettingId::unexpected_quota);
    CHECK(parse_setting(quota, "1GiB") == 1ll << 30);  // was quietly 64 MiB before the table
    CHECK_FALSE(parse_setting(quota, "2048G"));        // above 1 TiB
    CHECK_FALSE(parse_setting(quota, "lots"));
    const auto& spin = setting_spec(SettingId::tcp_spin_us);
    CHECK(parse_setting(spin, "0") == 0);
    CHECK_FALSE(parse_setting(spin, "abc"));  // was quietly 0
    CHECK_FALSE(parse_setting(spin, "10001"));
    CHECK_FALSE(parse_setting(spin, "5us"));
    CHECK(parse_setting(setting_spec(SettingId::verbs_gid_index), "-1") == -1);
    CHECK_FALSE(parse_setting(setting_spec(SettingId::verbs_port), "-1"));
    CHECK(parse_setting(setting_spec(SettingId::tcp_stall_timeout), "2s") == 2000);
    CHECK_FALSE(parse_setting(setting_spec(SettingId::tcp_stall_timeout), "0"));
    CHECK(parse_setting(setting_spec(SettingId::tcp_legacy), "yes") == 1);
    CHECK_FALSE(parse_setting(setting_spec(SettingId::tcp_legacy), "2"));
    CHECK(parse_setting(setting_spec(SettingId::shm_split_copy), "auto") == 2);
    CHECK_FALSE(parse_setting(setting_spec(SettingId::shm_split_copy), "always"));
}

TEST_CASE("the option string overrides the environment, which overrides the default",
          "[settings]") {
    setenv("BMI_TCP_SPIN_US", "30", 1);
    setenv("BMI_SHM_SLOT_SIZE", "4K", 1);
    Settings settings;
    REQUIRE(settings.load("tcp_spin_us=7") == 0);
    unsetenv("BMI_TCP_SPIN_US");
    unsetenv("BMI_SHM_SLOT_SIZE");
    CHECK(settings.number(SettingId::tcp_spin_us) == 7);
    CHECK(settings.source(SettingId::tcp_spin_us) == SettingSource::option_string);
    CHECK(settings.number(SettingId::shm_slot_size) == 4096);
    CHECK(settings.source(SettingId::shm_slot_size) == SettingSource::environment);
    CHECK(settings.number(SettingId::shm_ring_slots) == 64);
    CHECK(settings.source(SettingId::shm_ring_slots) == SettingSource::table_default);
    CHECK(settings.shown(SettingId::shm_slot_size) == "4K");
}

TEST_CASE("a bad value fails the load and the warning names the setting, value and range",
          "[settings]") {
    setenv("BMI_UNEXPECTED_QUOTA", "1GB", 1);
    CapturedStderr captured;
    Settings settings;
    const int rc = settings.load("shm_ring_slots=many");
    unsetenv("BMI_UNEXPECTED_QUOTA");
    const std::string log = captured.stop();
    INFO(log);
    CHECK(rc == -BMI_EINVAL);
    // Both mistakes are reported, each with what was expected.
    CHECK(log.find("BMI_UNEXPECTED_QUOTA (environment; option unexpected_quota) = \"1GB\" is "
                   "not valid: expected a size from 0 to 1024G bytes") != std::string::npos);
    CHECK(log.find("BMI_SHM_RING_SLOTS (BMI_initialize option shm_ring_slots) = \"many\" is "
                   "not valid: expected a whole number from 4 to 4096") != std::string::npos);
    CHECK_FALSE(settings.valid(SettingId::unexpected_quota));
    CHECK(settings.number(SettingId::unexpected_quota) == 64 << 20);  // never half-applied
}

TEST_CASE("an option key the table does not have is refused", "[settings]") {
    CapturedStderr captured;
    Settings settings;
    CHECK(settings.load("shm_ring_slot=128") == -BMI_EINVAL);  // misspelt
    CHECK(settings.load("emulate_lists") == -BMI_EINVAL);      // no value
    CHECK(settings.load("debug=all") == -BMI_EINVAL);          // environment only
    const std::string log = captured.stop();
    CHECK(log.find("option \"shm_ring_slot=128\" is not valid") != std::string::npos);
    CHECK(log.find("read from the environment only") != std::string::npos);
}
