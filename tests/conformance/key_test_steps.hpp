// SPDX-License-Identifier: LGPL-2.1-or-later
// Steps the per-method security-key tests share: the key_file= option, and a client's first
// unexpected message whose outcome says whether the handshake let it through.
#pragma once

#include <string>

#include "harness.hpp"

namespace bmi::test {

inline std::string key_option(const std::string& path) { return "key_file=" + path; }

// The client's first unexpected message to the server: its completion error.
inline int send_first(Pair& pair, int deadline_ms) {
    const char text[] = "hello";
    auto request = unexpected_request(pair.client, pair.server_addr, text, sizeof text, 99);
    bmi_op_id_t id = 0;
    const int rc = pair.client.instance->post(request, id, nullptr);
    if (rc != 0) return rc < 0 ? rc : 0;
    return wait_op(pair.client, id, deadline_ms).error;
}

}  // namespace bmi::test
