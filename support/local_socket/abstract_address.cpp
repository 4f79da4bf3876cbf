// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/local_socket/abstract_address.hpp"

#include <cstddef>
#include <cstring>

namespace bmi::support {

std::optional<AbstractAddress> abstract_address(std::string_view name) {
    AbstractAddress out;
    // sun_path[0] stays '\0': that is what makes the name abstract.
    if (name.size() > sizeof out.address.sun_path - 1) return std::nullopt;
    out.address.sun_family = AF_UNIX;
    std::memcpy(out.address.sun_path + 1, name.data(), name.size());
    out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return out;
}

}  // namespace bmi::support
