// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info's libfabric section: the providers fi_getinfo offers on this machine.
#pragma once

#include <ostream>

namespace bmi::info {

// Lists each provider (and endpoint type) fi_getinfo finds, with what the ofi method needs of
// it. Prints why not when libbmi was built without libfabric or cannot open it. Returns the
// provider count.
int print_fabric_providers(std::ostream& out);

}  // namespace bmi::info
