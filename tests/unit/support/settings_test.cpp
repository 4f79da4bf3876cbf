// SPDX-License-Identifier: LGPL-2.1-or-later
// The settings table and its strict reader: every row is well formed and parses its own
// default, a table gathers the rows of several owners, the environment overrides the default
// and the option string the environment, and a bad value or key is refused with a warning
// that names it. The methods' rows are checked in tests/conformance/settings_test.cpp.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

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

// Rows of an owner outside support, as a method contributes its own: the table gathers them
// after support's, and Settings reads them by the owner's enum.
namespace owner {
enum class SettingId : std::uint8_t {
    spin_us,
    slot_size,
    ring_slots,
    legacy,
    split_copy,
    early_peer_bytes,
};
constexpr SettingSpec rows[] = {
    {SettingId::spin_us, "owner_spin_us", "BMI_OWNER_SPIN_US", SettingType::count, "50", "us", 0,
     10'000, "", "spin"},
    {SettingId::slot_size, "owner_slot_size", "BMI_OWNER_SLOT_SIZE", SettingType::size, "8K",
     "bytes", 256, 1 << 20, "", "slot"},
    {SettingId::ring_slots, "owner_ring_slots", "BMI_OWNER_RING_SLOTS", SettingType::count, "64",
     "slots", 4, 4096, "", "slots"},
    {SettingId::legacy, "owner_legacy", "BMI_OWNER_LEGACY", SettingType::flag, "0", "", 0, 0, "",
     "legacy"},
    {SettingId::split_copy, "owner_split_copy", "BMI_OWNER_SPLIT_COPY", SettingType::choice, "auto",
     "", 0, 0, "0|1|auto", "split"},
    // Renamed twice: both former names are still read.
    {SettingId::early_peer_bytes, "owner_early_peer_bytes", "BMI_OWNER_EARLY_PEER_BYTES",
     SettingType::size, "4M", "bytes", 0, 1 << 30, "", "early",
     "BMI_OWNER_EARLY_BYTES|BMI_OWNER_EARLY"},
};
static_assert(rows_follow_ids(rows, 6));
static_assert(!rows_follow_ids(rows, 5));  // one row more than the enum says
constexpr OwnedRows owned{rows, SettingId::early_peer_bytes};
const SettingSpec& setting_spec(SettingId id) { return owned[id]; }

const SettingTable& table() {
    static const SettingTable gathered{general_setting_rows(), rows};
    return gathered;
}
}  // namespace owner

TEST_CASE("every row of support's table is complete and parses its own default", "[settings]") {
    const Settings defaults(general_settings());
    for (const auto& spec : general_settings().rows()) {
        INFO(spec.env);
        CHECK(general_settings().find(spec.key) == &spec);
        // The option key is the variable without BMI_, in lower case.
        CHECK(spec.env.substr(0, 4) == "BMI_");
        CHECK(lower(spec.env.substr(4)) == spec.key);
        CHECK_FALSE(spec.meaning.empty());
        if (spec.type != SettingType::text) {
            auto value = parse_setting(spec, spec.default_text);
            REQUIRE(value);
            // The value shown for the default reads back as the same value.
            CHECK(parse_setting(spec, defaults.shown(spec)) == value);
        }
        if (spec.type == SettingType::size || spec.type == SettingType::duration ||
            spec.type == SettingType::count)
            CHECK(spec.min <= spec.max);
    }
}

TEST_CASE("a table gathers its owners' rows in order and knows where each one is", "[settings]") {
    const SettingTable& table = owner::table();
    const auto general = general_setting_rows();
    REQUIRE(table.size() == general.size() + std::size(owner::rows));
    std::size_t i = 0;
    for (const auto& spec : table.rows()) {
        const SettingSpec* expected = i < general.size() ? &general[i]
                                                         : &owner::rows[i - general.size()];
        CHECK(&spec == expected);
        CHECK(table.position(spec) == i);
        ++i;
    }
    CHECK(table.find("owner_legacy") == &owner::rows[3]);
    CHECK(table.find("owner_legacy_framing") == nullptr);
    // A row of an owner whose block is not in the table.
    CHECK_FALSE(general_settings().position(owner::rows[0]));
}

TEST_CASE("values are parsed in the row's type and bounded by its range", "[settings]") {
    const auto& quota = setting_spec(SettingId::unexpected_quota);
    CHECK(parse_setting(quota, "1GiB") == 1ll << 30);  // was quietly 64 MiB before the table
    CHECK_FALSE(parse_setting(quota, "2048G"));        // above 1 TiB
    CHECK_FALSE(parse_setting(quota, "lots"));
    const auto& spin = owner::setting_spec(owner::SettingId::spin_us);
    CHECK(parse_setting(spin, "0") == 0);
    CHECK_FALSE(parse_setting(spin, "abc"));  // was quietly 0
    CHECK_FALSE(parse_setting(spin, "10001"));
    CHECK_FALSE(parse_setting(spin, "5us"));
    const SettingSpec gid{owner::SettingId::spin_us,
                          "gid",
                          "BMI_GID",
                          SettingType::count,
                          "-1",
                          "",
                          -1,
                          65'535,
                          "",
                          "gid"};
    CHECK(parse_setting(gid, "-1") == -1);
    CHECK_FALSE(parse_setting(owner::rows[1], "-1"));
    const SettingSpec stall{owner::SettingId::spin_us,
                            "stall",
                            "BMI_STALL",
                            SettingType::duration,
                            "10s",
                            "ms",
                            1,
                            3'600'000,
                            "",
                            "stall"};
    CHECK(parse_setting(stall, "2s") == 2000);
    CHECK_FALSE(parse_setting(stall, "0"));
    CHECK(parse_setting(owner::rows[3], "yes") == 1);
    CHECK_FALSE(parse_setting(owner::rows[3], "2"));
    CHECK(parse_setting(owner::rows[4], "auto") == 2);
    CHECK_FALSE(parse_setting(owner::rows[4], "always"));
}

TEST_CASE("the option string overrides the environment, which overrides the default",
          "[settings]") {
    using owner::SettingId;
    setenv("BMI_OWNER_SPIN_US", "30", 1);
    setenv("BMI_OWNER_SLOT_SIZE", "4K", 1);
    Settings settings(owner::table());
    REQUIRE(settings.load("owner_spin_us=7") == 0);
    unsetenv("BMI_OWNER_SPIN_US");
    unsetenv("BMI_OWNER_SLOT_SIZE");
    CHECK(settings.number(SettingId::spin_us) == 7);
    CHECK(settings.source(SettingId::spin_us) == SettingSource::option_string);
    CHECK(settings.number(SettingId::slot_size) == 4096);
    CHECK(settings.source(SettingId::slot_size) == SettingSource::environment);
    CHECK(settings.number(SettingId::ring_slots) == 64);
    CHECK(settings.source(SettingId::ring_slots) == SettingSource::table_default);
    CHECK(settings.shown(SettingId::slot_size) == "4K");
    // support's own rows and the owner's, side by side in one Settings.
    CHECK(settings.number(bmi::support::SettingId::unexpected_quota) == 64 << 20);
}

TEST_CASE("a bad value fails the load and the warning names the setting, value and range",
          "[settings]") {
    setenv("BMI_UNEXPECTED_QUOTA", "1GB", 1);
    CapturedStderr captured;
    Settings settings(owner::table());
    const int rc = settings.load("owner_ring_slots=many");
    unsetenv("BMI_UNEXPECTED_QUOTA");
    const std::string log = captured.stop();
    INFO(log);
    CHECK(rc == -BMI_EINVAL);
    // Both mistakes are reported, each with what was expected.
    CHECK(log.find("BMI_UNEXPECTED_QUOTA (environment; option unexpected_quota) = \"1GB\" is "
                   "not valid: expected a size from 0 to 1024G bytes") != std::string::npos);
    CHECK(log.find("BMI_OWNER_RING_SLOTS (BMI_initialize option owner_ring_slots) = \"many\" "
                   "is not valid: expected a whole number from 4 to 4096") != std::string::npos);
    CHECK_FALSE(settings.valid(SettingId::unexpected_quota));
    CHECK(settings.number(SettingId::unexpected_quota) == 64 << 20);  // never half-applied
}

TEST_CASE("an option key the table does not have is refused", "[settings]") {
    CapturedStderr captured;
    Settings settings(owner::table());
    CHECK(settings.load("owner_ring_slot=128") == -BMI_EINVAL);  // misspelt
    CHECK(settings.load("emulate_lists") == -BMI_EINVAL);        // no value
    CHECK(settings.load("debug=all") == -BMI_EINVAL);            // environment only
    // A row of an owner that this table does not gather is not a key of it.
    CHECK(Settings(general_settings()).load("owner_spin_us=7") == -BMI_EINVAL);
    const std::string log = captured.stop();
    CHECK(log.find("option \"owner_ring_slot=128\" is not valid") != std::string::npos);
    CHECK(log.find("read from the environment only") != std::string::npos);
}

namespace {
std::size_t count_of(const std::string& text, std::string_view words) {
    std::size_t n = 0;
    for (auto at = text.find(words); at != std::string::npos; at = text.find(words, at + 1)) ++n;
    return n;
}

// The owner's table loaded with these variables set (and unset again) and these options.
struct Loaded {
    Settings settings{owner::table()};
    int rc = 0;
    std::string log;
};
Loaded load_owner(std::initializer_list<std::pair<const char*, const char*>> environment,
                  std::string_view options) {
    Loaded out;
    for (auto [name, value] : environment) setenv(name, value, 1);
    CapturedStderr captured;
    out.rc = out.settings.load(options);
    for (auto [name, value] : environment) unsetenv(name);
    out.log = captured.stop();
    return out;
}
}  // namespace

TEST_CASE("a former name is still read, with one warning that names the current one",
          "[settings]") {
    using owner::SettingId;
    CHECK(former_names(owner::rows[5]) ==
          std::vector<std::string_view>{"BMI_OWNER_EARLY_BYTES", "BMI_OWNER_EARLY"});
    CHECK(option_key("BMI_OWNER_EARLY") == "owner_early");
    std::string_view former;
    CHECK(owner::table().find_former("owner_early_bytes", former) == &owner::rows[5]);
    CHECK(former == "BMI_OWNER_EARLY_BYTES");
    CHECK(owner::table().find_former("owner_early_peer_bytes", former) == nullptr);

    SECTION("in the environment") {
        const Loaded r = load_owner({{"BMI_OWNER_EARLY_BYTES", "1M"}}, "");
        INFO(r.log);
        CHECK(r.rc == 0);
        CHECK(r.settings.number(SettingId::early_peer_bytes) == 1 << 20);
        CHECK(r.settings.source(SettingId::early_peer_bytes) == SettingSource::environment);
        CHECK(count_of(r.log, "\n") == 1);
        CHECK(count_of(r.log, "environment variable BMI_OWNER_EARLY_BYTES is the former name of "
                              "BMI_OWNER_EARLY_PEER_BYTES") == 1);
    }
    SECTION("in the option string, under the older of the two") {
        const Loaded r = load_owner({}, "owner_early=2M");
        INFO(r.log);
        CHECK(r.rc == 0);
        CHECK(r.settings.number(SettingId::early_peer_bytes) == 2 << 20);
        CHECK(r.settings.source(SettingId::early_peer_bytes) == SettingSource::option_string);
        CHECK(count_of(r.log, "\n") == 1);
        CHECK(count_of(r.log, "option owner_early is the former name of owner_early_peer_bytes") ==
              1);
    }
    SECTION("under both names with the same value") {
        const Loaded r =
            load_owner({{"BMI_OWNER_EARLY_PEER_BYTES", "3M"}, {"BMI_OWNER_EARLY", "3M"}},
                       "owner_early_peer_bytes=5M,owner_early_bytes=5M");
        INFO(r.log);
        CHECK(r.rc == 0);
        CHECK(r.settings.number(SettingId::early_peer_bytes) == 5 << 20);
        CHECK(count_of(r.log, "former name") == 2);
        CHECK(count_of(r.log, "different values") == 0);
    }
}

TEST_CASE("a setting given under its name and a former one with different values is refused",
          "[settings]") {
    using owner::SettingId;
    SECTION("in the environment") {
        const Loaded r =
            load_owner({{"BMI_OWNER_EARLY_PEER_BYTES", "1M"}, {"BMI_OWNER_EARLY_BYTES", "2M"}}, "");
        INFO(r.log);
        CHECK(r.rc == -BMI_EINVAL);
        CHECK_FALSE(r.settings.valid(SettingId::early_peer_bytes));
        CHECK(r.log.find("setting BMI_OWNER_EARLY_PEER_BYTES = \"1M\" and BMI_OWNER_EARLY_BYTES "
                         "= \"2M\" name the same setting (BMI_OWNER_EARLY_PEER_BYTES, option "
                         "owner_early_peer_bytes) with different values") != std::string::npos);
    }
    SECTION("in the option string, in either order") {
        for (std::string_view options : {"owner_early_peer_bytes=1M,owner_early=2M",
                                         "owner_early=2M,owner_early_peer_bytes=1M"}) {
            const Loaded r = load_owner({}, options);
            INFO(options << "\n" << r.log);
            CHECK(r.rc == -BMI_EINVAL);
            CHECK_FALSE(r.settings.valid(SettingId::early_peer_bytes));
            CHECK(r.log.find("different values") != std::string::npos);
            CHECK(r.log.find("owner_early = ") != std::string::npos);
            CHECK(r.log.find("owner_early_peer_bytes = ") != std::string::npos);
        }
    }
}
