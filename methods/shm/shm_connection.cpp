// SPDX-License-Identifier: LGPL-2.1-or-later
// Connection teardown of kernel objects; the protocol state is emptied by the method first.
#include "methods/shm/shm_connection.hpp"

#include <unistd.h>

namespace bmi::method::shm {

Connection::~Connection() {
    if (fd >= 0) close(fd);
    if (peer_event_fd >= 0) close(peer_event_fd);
    // Ops are never owned here; unlink whatever a failed teardown left so the hooks stay sane.
    send_queue.clear();
}

bool Connection::split_finishable() const {
    for (const auto& split : splits) {
        if (!split.claims_done) continue;  // still copying: has_local_work() says so
        const SplitBoardEntry& shared = own_board[split.entry];
        if (shared.push_failed.load(std::memory_order_acquire) != 0 ||
            shared.pushed.load(std::memory_order_acquire) >= split.sender_share)
            return true;
    }
    return false;
}

}  // namespace bmi::method::shm
