// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/local_socket/abstract_address.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>

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

std::string shm_listener_socket_name(std::string_view shm_name) {
    std::string full = "libbmi-shm." + std::to_string(getuid()) + ".";
    full.append(shm_name);
    return full;
}

bool abstract_name_bound(std::string_view name) {
    // /proc/net/unix writes an abstract name with '@' for its leading zero byte, last on the
    // line after a space.
    std::string wanted(1, '@');
    wanted.append(name);
    std::ifstream table("/proc/net/unix");
    std::string line;
    while (std::getline(table, line)) {
        if (line.size() < wanted.size()) continue;
        const std::size_t at = line.size() - wanted.size();
        if (line.compare(at, wanted.size(), wanted) == 0 && (at == 0 || line[at - 1] == ' '))
            return true;
    }
    return false;
}

}  // namespace bmi::support
