// SPDX-License-Identifier: LGPL-2.1-or-later
// The operations a verbs instance holds (verbs_op_book.hpp).
#include "methods/verbs/verbs_op_book.hpp"

#include "methods/kit/posted_recvs.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::verbs {

void VerbsOpBook::finish(Operation& op, int error) {
    op.method_state = 0;
    if (error < 0)
        BMI_LOG(verbs, "verbs: op %lld failed: %s", static_cast<long long>(op.id),
                support::error_name(error));
    completions_.complete(op, error);
}

void VerbsOpBook::fail_posted_recvs(VerbsPeer& peer, int error) {
    kit::fail_posted_recvs(peer, error, [this](Operation& op, int e) { finish(op, e); });
}

}  // namespace bmi::method::verbs
