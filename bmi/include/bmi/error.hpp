// SPDX-License-Identifier: LGPL-2.1-or-later
// BMI error codes as std::error_code. An errc value is the positive BMI_E* code, so a C return
// value -rc converts without a table; the category maps errno-based codes to generic
// conditions, so `ec == std::errc::invalid_argument` works.
#pragma once

#include <system_error>

#include "bmi-types.h"

namespace bmi {

enum class errc : int {
    invalid_argument = BMI_EINVAL,
    no_memory = BMI_ENOMEM,
    message_too_long = BMI_EMSGSIZE,
    protocol_error = BMI_EPROTO,
    not_supported = BMI_ENOSYS,
    unknown_protocol = BMI_ENOPROTOOPT,
    connection_reset = BMI_ECONNRESET,
    connection_refused = BMI_ECONNREFUSED,
    timed_out = BMI_ETIMEDOUT,
    address_in_use = BMI_EADDRINUSE,
    busy = BMI_EBUSY,
    cancelled = BMI_ECANCEL,
    host_not_found = BMI_EHOSTNTFD,
    try_again = BMI_ETRYAGAIN,
    network_unreachable = BMI_ENETUNREACH,      // off the planes of the allocation in force
    address_not_available = BMI_EADDRNOTAVAIL,  // an allocated plane this node is not on
    permission_denied = BMI_EACCES,             // the peer does not prove the security key
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

// From a C-style return or completion code (0 or -BMI_E*); 0 gives an empty error_code.
inline std::error_code error_from_code(int code) noexcept {
    if (code == 0) return {};
    return {code < 0 ? -code : code, error_category()};
}

}  // namespace bmi

template <>
struct std::is_error_code_enum<bmi::errc> : std::true_type {};
