// SPDX-License-Identifier: LGPL-2.1-or-later
// shm's options: environment, option string, which of the two wins, and strictness.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "bmi-types.h"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_settings.hpp"

using namespace bmi::method::shm;
using bmi::method::all_settings;
using bmi::support::Settings;

namespace {
// Settings as an instance reads them, then shm's options from them.
int load(const char* option_string, Options& out) {
    Settings settings(all_settings());
    if (int rc = settings.load(option_string); rc != 0) return rc;
    return load_options(settings, 0, out);
}

// What the row's default text means, parsed as any value is.
std::int64_t setting_value(const bmi::support::SettingSpec& row) {
    return *bmi::support::parse_setting(row, row.default_text);
}

SplitMode split_from(const char* option_string) {
    Options options;
    REQUIRE(load(option_string, options) == 0);
    return options.split_copy;
}
}  // namespace

TEST_CASE("shm options: the split mode is auto unless told 0 or 1", "[shm][options]") {
    ::unsetenv("BMI_SHM_SPLIT_COPY");
    CHECK(split_from("") == SplitMode::adaptive);
    CHECK(split_from("shm_split_copy=0") == SplitMode::never);
    CHECK(split_from("shm_split_copy=1") == SplitMode::always);
    CHECK(split_from("shm_split_copy=auto") == SplitMode::adaptive);
    ::setenv("BMI_SHM_SPLIT_COPY", "0", 1);
    CHECK(split_from("") == SplitMode::never);
    CHECK(split_from("shm_split_copy=auto") == SplitMode::adaptive);  // the option string wins
    ::unsetenv("BMI_SHM_SPLIT_COPY");
}

TEST_CASE("shm options: a value that is not a mode is refused, not ignored", "[shm][options]") {
    Options options;
    CHECK(load("shm_split_copy=2", options) == -BMI_EINVAL);
    CHECK(load("shm_split_copy=always", options) == -BMI_EINVAL);
    CHECK(load("shm_ring_slots=auto", options) == -BMI_EINVAL);  // auto is the split mode's
    CHECK(load("shm_ring_slots=48", options) == -BMI_EINVAL);    // not a power of two
    CHECK(load("shm_spin_us=20000", options) == -BMI_EINVAL);    // was quietly 10000
    CHECK(load("shm_transfer_spin_us=20000", options) == -BMI_EINVAL);
    CHECK(load("shm_transfer_spin_us=long", options) == -BMI_EINVAL);
}

TEST_CASE("shm options: the spin while a large message moves has its own cap", "[shm][options]") {
    ::unsetenv("BMI_SHM_TRANSFER_SPIN_US");
    Options options;
    REQUIRE(load("", options) == 0);
    CHECK(options.transfer_spin_us == 500);
    REQUIRE(load("shm_transfer_spin_us=0", options) == 0);  // 0: the short spin's cap
    CHECK(options.transfer_spin_us == 0);
}

TEST_CASE("shm options: shared buffers are on unless turned off", "[shm][options]") {
    ::unsetenv("BMI_SHM_SHARED_BUFFERS");
    Options options;
    REQUIRE(load("", options) == 0);
    CHECK(options.shared_buffers);
    REQUIRE(load("shm_shared_buffers=0", options) == 0);
    CHECK_FALSE(options.shared_buffers);
}

TEST_CASE("shm options: the rows hold the defaults, the structs none of their own",
          "[shm][options]") {
    // A default written in Options too would be a second copy that can drift from the row.
    const Options unset;
    CHECK(unset.slot_count == 0);
    CHECK(unset.slot_size == 0);
    CHECK(unset.spin_us == 0);
    CHECK(unset.transfer_spin_us == 0);
    CHECK_FALSE(unset.single_copy);
    CHECK(unset.single_copy_min == 0);
    CHECK_FALSE(unset.shared_buffers);
    CHECK(unset.pool.bytes == 0);
    CHECK(unset.pool.per_class == 0);
    CHECK(unset.budgets.early.peer_bytes ==
          bmi::method::EarlyBudget::Limits{}.peer_bytes);  // unbounded
    CHECK(unset.budgets.early.total_bytes == bmi::method::EarlyBudget::Limits{}.total_bytes);
    CHECK(unset.budgets.offer_bytes == 0);
    CHECK(unset.budgets.offer_count == 0);
    CHECK(unset.setup_timeout.count() == 0);

    ::unsetenv("BMI_SHM_RING_SLOTS");
    ::unsetenv("BMI_SHM_EARLY_PEER_BYTES");
    Options options;
    REQUIRE(load_options(Settings{all_settings()}, 0, options) == 0);
    CHECK(static_cast<std::int64_t>(options.slot_count) ==
          setting_value(setting_spec(SettingId::ring_slots)));
    CHECK(options.budgets.early.peer_bytes ==
          setting_value(setting_spec(SettingId::early_peer_bytes)));
}
