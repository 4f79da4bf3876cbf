// SPDX-License-Identifier: LGPL-2.1-or-later
// Compiles bmi.h as C++: C linkage, no C++-only constructs leaking in, and the same types.
#include "bmi.h"

#include <cstdint>
#include <type_traits>

static_assert(std::is_same_v<bmi_size_t, std::int64_t>);
static_assert(std::is_same_v<bmi_msg_tag_t, std::int32_t>);
static_assert(std::is_same_v<BMI_addr_t, std::int64_t>);
static_assert(std::is_same_v<bmi_op_id_t, std::int64_t>);
static_assert(std::is_same_v<bmi_context_id, std::int64_t>);
static_assert(std::is_same_v<bmi_error_code_t, std::int32_t>);
static_assert(
    std::is_same_v<decltype(&BMI_initialize), int (*)(const char*, const char*, int, char*)>);
static_assert(std::is_same_v<decltype(&BMI_addr_rev_lookup), const char* (*)(BMI_addr_t)>);
static_assert(BMI_EINVAL == ((15 | BMI_ERROR_BIT) | BMI_ERROR));
static_assert(BMI_ECANCEL == (1 | BMI_ERROR_BIT | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR));

int main() { return 0; }
