// SPDX-License-Identifier: LGPL-2.1-or-later
// shm's options: environment, option string, which of the two wins, and strictness.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "bmi-types.h"
#include "methods/shm/shm_options.hpp"

using namespace bmi::method::shm;
using bmi::support::Settings;

namespace {
// Settings as an instance reads them, then shm's options from them.
int load(const char* option_string, Options& out) {
    Settings settings;
    if (int rc = settings.load(option_string); rc != 0) return rc;
    return load_options(settings, 0, out);
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
}

TEST_CASE("shm options: shared buffers are on unless turned off", "[shm][options]") {
    ::unsetenv("BMI_SHM_SHARED_BUFFERS");
    Options options;
    REQUIRE(load("", options) == 0);
    CHECK(options.shared_buffers);
    REQUIRE(load("shm_shared_buffers=0", options) == 0);
    CHECK_FALSE(options.shared_buffers);
}

TEST_CASE("shm options: the table's defaults are the method's", "[shm][options]") {
    Options options;
    REQUIRE(load_options(Settings{}, 0, options) == 0);
    const Options built_in;
    CHECK(options.slot_count == built_in.slot_count);
    CHECK(options.slot_size == built_in.slot_size);
    CHECK(options.spin_us == built_in.spin_us);
    CHECK(options.single_copy == built_in.single_copy);
    CHECK(options.single_copy_min == built_in.single_copy_min);
    CHECK(options.split_copy == built_in.split_copy);
    CHECK(options.shared_buffers == built_in.shared_buffers);
    CHECK(options.budgets.early_bytes == built_in.budgets.early_bytes);
    CHECK(options.budgets.early_count == built_in.budgets.early_count);
    CHECK(options.budgets.early_total == built_in.budgets.early_total);
    CHECK(options.budgets.offer_bytes == built_in.budgets.offer_bytes);
    CHECK(options.budgets.offer_count == built_in.budgets.offer_count);
}
