// SPDX-License-Identifier: LGPL-2.1-or-later
// Conversions between BMI error codes (BMI_E*, as in bmi-types.h), errno values and names.
// Every layer reports failures as negative BMI codes; this is the only place that knows the map.
#pragma once

#include <span>

namespace bmi::support {

struct ErrorEntry {
    int code;         // positive BMI_E* value
    int errno_value;  // 0 for the non-errno codes (BMI_ECANCEL, ...)
    const char* name;
};

std::span<const ErrorEntry> error_table();
// Entry for a BMI code of either sign, or nullptr.
const ErrorEntry* find_error(int code);
// Negative BMI code for an errno of either sign; 0 for 0; -BMI_EDETAIL if unmapped.
int bmi_error_from_errno(int error);
// errno for a BMI code of either sign; 0 for 0; EIO for codes without one.
int errno_from_bmi_error(int code);
// "BMI_EINVAL", "BMI_SUCCESS" for 0, "unknown BMI error" otherwise.
const char* error_name(int code);
// What the code means, for people: "Connection refused", "the operation was cancelled";
// "success" for 0, "unknown BMI error" otherwise. Static strings, safe from any thread.
const char* error_meaning(int code);

}  // namespace bmi::support
