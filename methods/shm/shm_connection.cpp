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

}  // namespace bmi::method::shm
