// SPDX-License-Identifier: LGPL-2.1-or-later
// The control layer's services to a method (methods/method.hpp has when they may be called).
#pragma once

#include <cstdint>
#include <memory>

#include "bmi-types.h"
#include "methods/operation.hpp"

namespace bmi::method {

// Services the control layer offers a method. Call only from inside a Method member.
class Sink {
public:
    // op finished with error (0 or -BMI_E*); op.actual_size must already be final.
    virtual void complete(Operation& op, int error) = 0;
    // Gives an unknown peer (e.g. one that connected to us) a BMI_addr_t and returns it.
    // Returns the existing one if the peer is registered already.
    virtual BMI_addr_t register_peer(const std::shared_ptr<Peer>& peer) = 0;
    // Memory for a complete unexpected message from peer, charged to the unexpected quota and
    // to peer's fair share of it. nullptr means no room: leave the data in the network and
    // retry in a later progress() (the control layer makes wait_fd-independent retries when
    // memory is freed).
    virtual void* alloc_unexpected(const Peer& peer, bmi_size_t size) = 0;
    // Hands a complete unexpected message to the application; buffer came from
    // alloc_unexpected and now belongs to the control layer.
    virtual void deliver_unexpected(const std::shared_ptr<Peer>& peer, void* buffer,
                                    bmi_size_t size, bmi_msg_tag_t tag, std::uint8_t msg_class) = 0;
    // A registered peer became one nobody can reach again: it reached us first, we have no
    // address to call it back on, and its last connection closed (Method::peer_gone is now
    // true). The control layer drops its address once the application holds no reference to
    // it and has been shown every unexpected message it sent (OrangeFS's forget list).
    virtual void peer_gone(const Peer& peer) = 0;

protected:
    ~Sink() = default;
};

}  // namespace bmi::method
