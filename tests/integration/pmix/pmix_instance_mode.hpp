// SPDX-License-Identifier: LGPL-2.1-or-later
// pmix_alloc_child's `instance` mode (pmix_instance_mode.cpp).
#pragma once

#include <span>
#include <string>

namespace bmi::test::pmix {

int instance_mode(std::span<const std::string> args);

}  // namespace bmi::test::pmix
