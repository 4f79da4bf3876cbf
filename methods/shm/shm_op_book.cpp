// SPDX-License-Identifier: LGPL-2.1-or-later
// The operations an shm instance holds (shm_op_book.hpp).
#include "methods/shm/shm_op_book.hpp"

namespace bmi::method::shm {

void ShmOpBook::fail_posted_recvs(ShmPeer& peer, int error) {
    while (!peer.posted_recvs.empty()) {
        Operation& op = peer.posted_recvs.front();
        peer.posted_recvs.erase(op);
        finish(op, error);
    }
}

}  // namespace bmi::method::shm
