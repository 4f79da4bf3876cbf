// SPDX-License-Identifier: LGPL-2.1-or-later
// Per-source admission: how many accepted connections one source (an IP address; a process
// for shm) may hold before they have proven anything (finished the method's handshake). The
// acceptor (acceptor.hpp) admits each accepted connection under a ticket, the method's id for
// it, and releases the ticket when the connection proves itself or closes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

namespace bmi::method::kit {

class SourceAdmission {
public:
    using Clock = std::chrono::steady_clock;
    struct Held {
        std::uint64_t ticket = 0;
        Clock::time_point since{};  // when it was admitted
    };

    SourceAdmission() = default;
    explicit SourceAdmission(std::size_t per_source) : limit_(per_source) {}
    void set_limit(std::size_t per_source) { limit_ = per_source; }
    std::size_t limit() const { return limit_; }

    // True if `source` may hold one more.
    bool has_room(const std::string& source) const { return held(source) < limit_; }
    // The oldest ticket `source` holds, if any.
    std::optional<Held> oldest(const std::string& source) const {
        auto it = by_source_.find(source);
        if (it == by_source_.end() || it->second.empty()) return std::nullopt;
        return it->second.front();
    }
    void admit(const std::string& source, std::uint64_t ticket, Clock::time_point now) {
        by_source_[source].push_back({ticket, now});
        source_of_[ticket] = source;
    }
    // The connection under `ticket` proved itself or closed; returns its source if it held a
    // place (a ticket frees its place once).
    std::optional<std::string> release(std::uint64_t ticket) {
        auto found = source_of_.find(ticket);
        if (found == source_of_.end()) return std::nullopt;
        std::string source = std::move(found->second);
        source_of_.erase(found);
        auto it = by_source_.find(source);
        if (it != by_source_.end()) {
            std::erase_if(it->second, [ticket](const Held& h) { return h.ticket == ticket; });
            if (it->second.empty()) by_source_.erase(it);
        }
        return source;
    }
    bool holds(std::uint64_t ticket) const { return source_of_.count(ticket) != 0; }
    // Unproven connections `source` holds now.
    std::size_t held(const std::string& source) const {
        auto it = by_source_.find(source);
        return it == by_source_.end() ? 0 : it->second.size();
    }

private:
    std::size_t limit_ = std::numeric_limits<std::size_t>::max();
    std::unordered_map<std::string, std::deque<Held>> by_source_;
    std::unordered_map<std::uint64_t, std::string> source_of_;
};

}  // namespace bmi::method::kit
