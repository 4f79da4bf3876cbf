// SPDX-License-Identifier: LGPL-2.1-or-later
// shm's options: environment, option string, and which of the two wins.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "bmi-types.h"
#include "methods/shm/shm_options.hpp"

using namespace bmi::method::shm;

namespace {
SplitMode split_from(const char* option_string) {
    Options options;
    REQUIRE(load_options(option_string, 0, options) == 0);
    return options.split_copy;
}
}  // namespace

TEST_CASE("shm options: the split mode is auto unless told 0 or 1", "[shm][options]") {
    ::unsetenv("BMI_SHM_SPLIT_COPY");
    CHECK(split_from("") == SplitMode::adaptive);
    CHECK(split_from("shm_split_copy=0") == SplitMode::never);
    CHECK(split_from("shm_split_copy=1") == SplitMode::always);
    CHECK(split_from("shm_split_copy=auto") == SplitMode::adaptive);
    CHECK(split_from("shm_split_copy=2") == SplitMode::adaptive);     // not a mode: ignored
    CHECK(split_from("shm_split_copy=always") == SplitMode::adaptive);
    ::setenv("BMI_SHM_SPLIT_COPY", "0", 1);
    CHECK(split_from("") == SplitMode::never);
    CHECK(split_from("shm_split_copy=auto") == SplitMode::adaptive);  // the option string wins
    ::unsetenv("BMI_SHM_SPLIT_COPY");
}

TEST_CASE("shm options: auto is a word only the split mode knows", "[shm][options]") {
    Options options;
    REQUIRE(load_options("shm_ring_slots=auto", 0, options) == 0);
    CHECK(options.slot_count == Options{}.slot_count);
    CHECK(load_options("shm_ring_slots=48", 0, options) == -BMI_EINVAL);  // not a power of two
}

TEST_CASE("shm options: shared buffers are on unless turned off", "[shm][options]") {
    ::unsetenv("BMI_SHM_SHARED_BUFFERS");
    Options options;
    REQUIRE(load_options("", 0, options) == 0);
    CHECK(options.shared_buffers);
    REQUIRE(load_options("shm_shared_buffers=0", 0, options) == 0);
    CHECK_FALSE(options.shared_buffers);
}
