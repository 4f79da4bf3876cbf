// SPDX-License-Identifier: LGPL-2.1-or-later
// UnaskedSweep: dropping data no receive asked for from the provider's unexpected queue.
#include "methods/ofi/ofi_method_impl.hpp"

namespace bmi::method::ofi {

bool UnaskedSweep::post(Fabric& fabric) {
    running_ = fabric.drop_unasked(data_bit, ~data_bit, &request_.context) == 0;
    return running_;
}

void UnaskedSweep::on_found(Fabric& fabric) {
    ++dropped_;

    // A peer sending faster than we drop gets the rest of its flood dropped next round.
    if (++round_ < most_per_round)
        post(fabric);
    else
        running_ = false;
}

}  // namespace bmi::method::ofi
