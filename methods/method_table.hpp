// SPDX-License-Identifier: LGPL-2.1-or-later
// The statically compiled method table: every method this build contains, in preference order.
#pragma once

#include <span>
#include <string_view>

#include "methods/method.hpp"

namespace bmi::method {

std::span<const Descriptor> compiled_methods();
// By name ("bmi_tcp") or scheme ("tcp"); nullptr if not compiled in.
const Descriptor* find_method(std::string_view name_or_scheme);

}  // namespace bmi::method
