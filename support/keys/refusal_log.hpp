// SPDX-License-Identifier: LGPL-2.1-or-later
// Says "refused X: why" once per peer per interval, so a flood of failing handshakes costs the
// log one line per source, not one per attempt. Holds at most `capacity` sources; past that it
// starts over (a flood from many sources then logs again, at most capacity lines per interval).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace bmi::support::keys {

class RefusalLog {
public:
    using Clock = std::chrono::steady_clock;
    explicit RefusalLog(std::chrono::seconds interval = std::chrono::seconds(60),
                        std::size_t capacity = 1024)
        : interval_(interval), capacity_(capacity) {}

    // Counts one refusal of `source` (e.g. the remote host); true if it should be logged now.
    bool should_log(const std::string& source, Clock::time_point now = Clock::now());
    // Refusals counted but not logged since the start.
    std::uint64_t suppressed() const { return suppressed_; }
    std::uint64_t refused() const { return refused_; }

private:
    std::chrono::seconds interval_;
    std::size_t capacity_;
    std::unordered_map<std::string, Clock::time_point> last_logged_;
    std::uint64_t suppressed_ = 0;
    std::uint64_t refused_ = 0;
};

}  // namespace bmi::support::keys
