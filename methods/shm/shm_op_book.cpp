// SPDX-License-Identifier: LGPL-2.1-or-later
// The operations an shm instance holds (shm_op_book.hpp).
#include "methods/shm/shm_op_book.hpp"

#include "methods/kit/posted_recvs.hpp"

namespace bmi::method::shm {

void ShmOpBook::fail_posted_recvs(ShmPeer& peer, int error) {
    kit::fail_posted_recvs(peer, error, [this](Operation& op, int e) { finish(op, e); });
}

}  // namespace bmi::method::shm
