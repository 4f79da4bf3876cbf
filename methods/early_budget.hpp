// SPDX-License-Identifier: LGPL-2.1-or-later
// The methods' name for the budget of early messages: support::Budget, which the control
// layer's unexpected-message quota uses too.
#pragma once

#include "support/budget/budget.hpp"

namespace bmi::method {

using EarlyBudget = support::Budget;

}  // namespace bmi::method
