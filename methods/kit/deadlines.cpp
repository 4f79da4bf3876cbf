// SPDX-License-Identifier: LGPL-2.1-or-later
// The deadline engine's heap and timerfd (deadlines.hpp).
#include "methods/kit/deadlines.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "support/error/error_map.hpp"

namespace bmi::method::kit {

namespace {
using Clock = Deadlines::Clock;

// std::push_heap builds a max-heap: "later" as less puts the earliest on top.
template <class E>
bool later(const E& a, const E& b) {
    return a.at > b.at;
}

// Below this many heap entries stale ones are left to come up on their own.
constexpr std::size_t compact_floor = 64;
// A progress deadline looks this often per limit while the peer keeps moving bytes.
constexpr int progress_looks = 8;
}  // namespace

Deadlines::~Deadlines() {
    if (fd_ >= 0) close(fd_);
}

int Deadlines::open() {
    fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return fd_ < 0 ? support::bmi_error_from_errno(errno) : 0;
}

void Deadlines::schedule(DeadlineKey key, Clock::time_point at) {
    const std::uint64_t generation = next_generation_++;
    live_[key] = Slot{at, generation};
    heap_.push_back(Entry{at, key, generation});
    std::push_heap(heap_.begin(), heap_.end(), later<Entry>);
    compact_if_stale();
    if (at < armed_at_) arm(at);
}

void Deadlines::schedule_by(DeadlineKey key, Clock::time_point at) {
    auto it = live_.find(key);
    if (it == live_.end() || at < it->second.at) schedule(key, at);
}

void Deadlines::cancel(DeadlineKey key) {
    live_.erase(key);
    compact_if_stale();
}

void Deadlines::cancel_all(std::uint64_t id) {
    for (std::size_t kind = 0; kind < deadline_kinds; ++kind)
        live_.erase(DeadlineKey{id, static_cast<DeadlineKind>(kind)});
    compact_if_stale();
}

std::optional<Clock::time_point> Deadlines::when(DeadlineKey key) const {
    auto it = live_.find(key);
    if (it == live_.end()) return std::nullopt;
    return it->second.at;
}

bool Deadlines::consume_expiry() {
    std::uint64_t expirations = 0;
    if (read(fd_, &expirations, sizeof expirations) != sizeof expirations) return false;
    armed_at_ = Clock::time_point::max();  // a one-shot timer that went off is not set
    return true;
}

void Deadlines::collect_due(Clock::time_point now) {
    while (!heap_.empty() && heap_.front().at <= now) {
        std::pop_heap(heap_.begin(), heap_.end(), later<Entry>);
        const Entry entry = heap_.back();
        heap_.pop_back();
        auto it = live_.find(entry.key);
        if (it != live_.end() && it->second.generation == entry.generation) batch_.push_back(entry);
    }
}

bool Deadlines::take(const Entry& entry) {
    auto it = live_.find(entry.key);
    if (it == live_.end() || it->second.generation != entry.generation) return false;
    live_.erase(it);
    return true;
}

void Deadlines::arm_for_earliest() {
    // Stale entries on top would wake us for nothing.
    while (!heap_.empty()) {
        const Entry& top = heap_.front();
        auto it = live_.find(top.key);
        if (it != live_.end() && it->second.generation == top.generation) break;
        std::pop_heap(heap_.begin(), heap_.end(), later<Entry>);
        heap_.pop_back();
    }
    if (!heap_.empty() && heap_.front().at < armed_at_) arm(heap_.front().at);
}

void Deadlines::arm(Clock::time_point at) {
    if (fd_ < 0) return;
    // Absolute, so no clock reading here; a time already past goes off at once. A zero
    // it_value would disarm the timer instead, hence the smallest positive time.
    const auto ns = std::max<long long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count(), 1);
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (timerfd_settime(fd_, TFD_TIMER_ABSTIME, &when, nullptr) == 0) {
        armed_at_ = at;
        ++arms_;
    }
}

void Deadlines::compact_if_stale() {
    // Rebuilt once stale entries outnumber live ones: each costs O(1) amortised.
    if (heap_.size() <= compact_floor || heap_.size() <= 2 * live_.size()) return;
    heap_.clear();
    for (const auto& [key, slot] : live_) heap_.push_back(Entry{slot.at, key, slot.generation});
    std::make_heap(heap_.begin(), heap_.end(), later<Entry>);
}

void ProgressDeadline::start(Deadlines& engine, DeadlineKey key, std::uint64_t count,
                             std::chrono::milliseconds limit) {
    if (timed) return;
    timed = true;
    seen = count;
    since = Clock::now();
    engine.schedule(key, since + std::max<Clock::duration>(limit / progress_looks,
                                                           std::chrono::milliseconds(1)));
}

bool ProgressDeadline::expired(Deadlines& engine, DeadlineKey key, std::uint64_t count,
                               Clock::time_point now, std::chrono::milliseconds limit) {
    if (count != seen) {
        // Bytes moved since the last look, at some time after it: look again soon.
        seen = count;
        since = now;
        engine.schedule(key, now + std::max<Clock::duration>(limit / progress_looks,
                                                             std::chrono::milliseconds(1)));
        return false;
    }
    if (now - since >= limit) {
        timed = false;
        return true;
    }
    engine.schedule(key, since + limit);
    return false;
}

}  // namespace bmi::method::kit
