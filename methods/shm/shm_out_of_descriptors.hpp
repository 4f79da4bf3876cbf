// SPDX-License-Identifier: LGPL-2.1-or-later
// The count and the rate-limited warning of what shm refused for want of file descriptors.
//
// Its own object because three concerns refuse for it (accepting, hellos and their replies,
// shared-buffer offers) and the user should read one count and one advice.
#pragma once

#include <cstdint>

#include "support/keys/refusal_log.hpp"

namespace bmi::method::shm {

class OutOfDescriptors {
public:
    // Counts a refusal of `what` and warns, at most once a minute, which limit to raise.
    void warn(const char* what);
    // Counts a refusal someone else has logged already.
    void count() { ++refusals_; }

private:
    support::keys::RefusalLog log_;
    std::uint64_t refusals_ = 0;
};

}  // namespace bmi::method::shm
