// SPDX-License-Identifier: LGPL-2.1-or-later
// Per-source admission: how many connections one source address may hold open before they
// have proven anything (finished the method's handshake). A listener admits each accepted
// connection under a ticket of its choosing and releases the ticket when the connection
// proves itself or closes. At the bound, the listener closes the source's oldest if that one
// had its time to speak, else the newcomer: refusing newcomers alone would let one process
// lock every later client of its host out. Shared by the methods so that a listener only
// supplies the source's name and its policy for the oldest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

namespace bmi::method {

class SourceAdmission {
public:
    SourceAdmission() = default;
    explicit SourceAdmission(std::size_t per_source) : limit_(per_source) {}
    void set_limit(std::size_t per_source) { limit_ = per_source; }
    std::size_t limit() const { return limit_; }

    // True if `source` may hold one more.
    bool has_room(const std::string& source) const { return held(source) < limit_; }
    // The oldest ticket `source` holds, if any.
    std::optional<std::uint64_t> oldest(const std::string& source) const {
        auto it = held_.find(source);
        if (it == held_.end() || it->second.empty()) return std::nullopt;
        return it->second.front();
    }
    void admit(const std::string& source, std::uint64_t ticket) {
        held_[source].push_back(ticket);
    }
    // The connection under `ticket` proved itself or closed.
    void release(const std::string& source, std::uint64_t ticket) {
        auto it = held_.find(source);
        if (it == held_.end()) return;
        std::erase(it->second, ticket);
        if (it->second.empty()) held_.erase(it);
    }
    // Unproven connections `source` holds now.
    std::size_t held(const std::string& source) const {
        auto it = held_.find(source);
        return it == held_.end() ? 0 : it->second.size();
    }

private:
    std::size_t limit_ = std::numeric_limits<std::size_t>::max();
    std::unordered_map<std::string, std::deque<std::uint64_t>> held_;
};

}  // namespace bmi::method
