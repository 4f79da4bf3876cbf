// SPDX-License-Identifier: LGPL-2.1-or-later
// The statically compiled method table: every method this build contains, in preference order.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "methods/method.hpp"

namespace bmi::method {

std::span<const Descriptor> compiled_methods();
// By name ("bmi_tcp") or scheme ("tcp"), or their aliases ("bmi_ib", "ib"); nullptr if not
// compiled in.
const Descriptor* find_method(std::string_view name_or_scheme);
// The method's own scheme for an alias ("ib" -> "verbs"); any other scheme unchanged.
std::string_view canonical_scheme(std::string_view scheme);
// "ib://h:p" -> "verbs://h:p": what the method parses. Anything else is returned unchanged.
std::string canonical_address(std::string_view address);

}  // namespace bmi::method
