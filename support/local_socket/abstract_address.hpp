// SPDX-License-Identifier: LGPL-2.1-or-later
// Names in Linux's abstract unix socket namespace: no file to leave behind, released by the
// kernel when the last descriptor of its holder closes, however that process ends.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <optional>
#include <string>
#include <string_view>

namespace bmi::support {

struct AbstractAddress {
    sockaddr_un address{};
    socklen_t length = 0;  // what bind and connect take: the name's bytes, no terminator
};

// The address of `name` (without the leading '\0'), or nullopt when it does not fit in
// sun_path: a cut name could collide with another one.
std::optional<AbstractAddress> abstract_address(std::string_view name);

// The abstract name the shm listener of `shm_name` binds: "libbmi-shm.<uid>.<shm_name>". The
// uid keeps users apart by name (the shm method's credential check keeps them apart by fact).
std::string shm_listener_socket_name(std::string_view shm_name);

// Whether a socket in this network namespace holds the abstract `name` (/proc/net/unix).
bool abstract_name_bound(std::string_view name);

}  // namespace bmi::support
