// SPDX-License-Identifier: LGPL-2.1-or-later
// Ending a peer's posted receives all at once (the peer is gone, closed for the key, or the
// instance cancels it), the same in every method.
#pragma once

#include "methods/operation.hpp"

namespace bmi::method::kit {

// Ends every receive still posted toward peer with error, earliest posted first, through
// finish(op, error), the method's one way of completing an op. Each op leaves the queue before
// finish runs, since the control layer may free it at once.
template <class Finish>
void fail_posted_recvs(Peer& peer, int error, Finish&& finish) {
    while (!peer.posted_recvs.empty()) {
        Operation& op = peer.posted_recvs.front();
        peer.posted_recvs.erase(op);
        finish(op, error);
    }
}

}  // namespace bmi::method::kit
