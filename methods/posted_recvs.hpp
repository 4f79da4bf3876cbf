// SPDX-License-Identifier: LGPL-2.1-or-later
// The receives a peer has posted and no message has matched yet, as every method keeps them:
// by tag, earliest posted first (BMI matches peer and tag exactly), in O(1) expected time
// however many wait, and in post order for the paths that fail or refuse them all.
#pragma once

#include "methods/method.hpp"
#include "support/op_queue/tagged_op_queue.hpp"

namespace bmi::method {

using PostedRecvs =
    support::TaggedOpQueue<Operation, bmi_msg_tag_t, SafeHook, &Operation::method_hook,
                           &Operation::method_order_hook, &Operation::tag>;

}  // namespace bmi::method
