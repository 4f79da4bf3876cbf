// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/refusal_log.hpp"

namespace bmi::support::keys {

bool RefusalLog::should_log(const std::string& source, Clock::time_point now) {
    ++refused_;
    auto it = last_logged_.find(source);
    if (it != last_logged_.end() && now - it->second < interval_) {
        ++suppressed_;
        return false;
    }
    if (it == last_logged_.end() && last_logged_.size() >= capacity_) last_logged_.clear();
    last_logged_[source] = now;
    return true;
}

}  // namespace bmi::support::keys
