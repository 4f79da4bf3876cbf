// SPDX-License-Identifier: LGPL-2.1-or-later
// The deadline engine every method uses: each deadline it keeps (a handshake's, a frame the
// peer owes, an RTS unanswered, bytes the peer does not take, a connect retry, a periodic
// sweep) is one entry of a min-heap, and one CLOCK_MONOTONIC timerfd in the method's epoll set
// goes off when the earliest is due. Nothing walks the connections on a period: a wake-up looks
// at the entries due and no other, and a pass the timer did not wake costs nothing.
//
// Cancelling and moving a deadline are lazy: the heap keeps the old entry, which a generation
// number marks stale, and drops it when it comes up (or when stale entries outnumber the live
// ones). The timerfd is set only for a deadline earlier than the one it waits for; a later one
// is found when the timer goes off, which then re-arms it, so deadlines that keep moving while
// data flows cost no system call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace bmi::method::kit {

// What a deadline is for. The method's own id (a connection id, 0 for the instance) says whose.
enum class DeadlineKind : std::uint8_t {
    setup,          // a handshake must be done by then
    stall,          // the peer owes us the rest of a frame
    send,           // the peer must take some of the bytes we have for it
    rendezvous,     // an RTS of ours must be answered
    connect_retry,  // a connect that found the listen backlog full is tried again
    sweep,          // a periodic look at every connection
    admission,      // a socket waits for its source's turn (kit::Acceptor's own)
    silence,        // a peer we wait on must be heard from
    probe,          // a peer we wait on, silent a while, is asked whether it restarted
};
inline constexpr std::size_t deadline_kinds = 9;

struct DeadlineKey {
    std::uint64_t id = 0;
    DeadlineKind kind = DeadlineKind::setup;
    bool operator==(const DeadlineKey&) const = default;
};

class Deadlines {
public:
    // The timerfd counts CLOCK_MONOTONIC, which is what steady_clock reads on Linux.
    using Clock = std::chrono::steady_clock;

    Deadlines() = default;
    Deadlines(const Deadlines&) = delete;
    Deadlines& operator=(const Deadlines&) = delete;
    ~Deadlines();

    // Creates the timerfd; 0 or -BMI_E*. The owner puts fd() in its epoll set for EPOLLIN and
    // calls expire() when it is readable.
    int open();
    int fd() const { return fd_; }

    // key is due at `at` from now on, instead of when it was before (earlier or later). A time
    // already past is due at the next wake-up, which comes at once.
    void schedule(DeadlineKey key, Clock::time_point at);
    // As schedule(), unless key is already due at `at` or earlier.
    void schedule_by(DeadlineKey key, Clock::time_point at);
    // key is not due any more; nothing if it was not scheduled.
    void cancel(DeadlineKey key);
    // Every kind of deadline of the id (a connection that closes).
    void cancel_all(std::uint64_t id);
    std::optional<Clock::time_point> when(DeadlineKey key) const;
    std::size_t size() const { return live_.size(); }
    // When the timerfd goes off (max: not set). An owner that is not woken per descriptor
    // reads the timerfd only once this has passed.
    Clock::time_point armed_at() const { return armed_at_; }

    // fd() was readable: consumes the expiry and calls due(key, now) for each deadline that
    // has come, earliest first, each removed before its call. due may schedule and cancel; a
    // key it cancels or moves is not called for this time. A stale readiness (the expiry was
    // consumed already) calls nothing. Returns how many were called.
    template <class F>
    std::size_t expire(F&& due) {
        if (!consume_expiry()) return 0;
        return run_due(Clock::now(), due);
    }
    // The same for the time `now`, without reading the timerfd. due must not call run_due
    // or expire.
    template <class F>
    std::size_t run_due(Clock::time_point now, F&& due) {
        collect_due(now);
        std::size_t called = 0;
        for (std::size_t i = 0; i < batch_.size(); ++i) {
            const DeadlineKey key = batch_[i].key;
            if (!take(batch_[i])) continue;
            ++called;
            due(key, now);
        }
        batch_.clear();
        arm_for_earliest();
        return called;
    }

    // Heap entries, live or stale (for tests of the lazy deletion).
    std::size_t heap_size() const { return heap_.size(); }
    // Times the timerfd was set (for tests: it must not be set while deadlines only move later).
    std::uint64_t arms() const { return arms_; }

private:
    struct Entry {
        Clock::time_point at;
        DeadlineKey key;
        std::uint64_t generation;
    };
    struct Slot {
        Clock::time_point at;
        std::uint64_t generation;
    };
    struct KeyHash {
        std::size_t operator()(const DeadlineKey& key) const {
            return std::hash<std::uint64_t>{}(key.id * deadline_kinds +
                                              static_cast<std::uint64_t>(key.kind));
        }
    };

    bool consume_expiry();
    // Moves the entries due by now, stale ones dropped, from the heap to batch_.
    void collect_due(Clock::time_point now);
    // Removes the entry's key from the live set if the entry is still its current one.
    bool take(const Entry& entry);
    void arm_for_earliest();
    void arm(Clock::time_point at);
    void compact_if_stale();

    int fd_ = -1;
    std::vector<Entry> heap_;  // min-heap on `at`
    std::unordered_map<DeadlineKey, Slot, KeyHash> live_;
    std::vector<Entry> batch_;  // scratch of run_due
    std::uint64_t next_generation_ = 1;
    // When the timerfd goes off; max: it is not set.
    Clock::time_point armed_at_ = Clock::time_point::max();
    std::uint64_t arms_ = 0;
};

// A deadline that moves on while the peer makes progress, kept without a clock reading per
// transfer: the owner counts the transfers that moved bytes, and only this deadline's wake-ups
// look at the count. While the count moves they come every limit / 8, so a peer that stops is
// caught between limit and 9/8 limit after its last byte, never earlier.
struct ProgressDeadline {
    using Clock = Deadlines::Clock;
    std::uint64_t seen = 0;     // the owner's progress count at the last look
    Clock::time_point since{};  // the last look that found progress (or the restart)
    bool timed = false;         // its entry is in the engine

    // Starts the clock if it is not running.
    void start(Deadlines& engine, DeadlineKey key, std::uint64_t count,
               std::chrono::milliseconds limit);
    // The peer owes us from now on although it moved nothing (a CTS went out, a pause ended).
    void restart(std::uint64_t count) {
        seen = count;
        since = Clock::now();
    }
    // Its wake-up came: true if the limit passed with no progress; else it is scheduled again.
    bool expired(Deadlines& engine, DeadlineKey key, std::uint64_t count, Clock::time_point now,
                 std::chrono::milliseconds limit);
    // The same, where `owed` says whether the peer still owes anything: if not, the clock
    // stops (its owner starts it again when the next wait begins) and it has not expired.
    bool expired_if_owed(bool owed, Deadlines& engine, DeadlineKey key, std::uint64_t count,
                         Clock::time_point now, std::chrono::milliseconds limit) {
        return expired_if_owed(owed, nothing_arrived, engine, key, count, now, limit);
    }
    // For progress our process need not take to count (a ring's tail the peer moves itself).
    static bool nothing_arrived() { return false; }
    // The same, where arrived() says whether the peer's progress is in fact here and not yet
    // taken (bytes in our socket, a message in our ring, room it made for ours): then it was
    // our process that was away longer than the limit (a debugger, the scheduler), not the
    // peer, and the clock starts again. Asked only when the limit has passed.
    template <class Arrived>
    bool expired_if_owed(bool owed, Arrived&& arrived, Deadlines& engine, DeadlineKey key,
                         std::uint64_t count, Clock::time_point now,
                         std::chrono::milliseconds limit) {
        if (!owed) {
            timed = false;
            return false;
        }
        if (!expired(engine, key, count, now, limit)) return false;
        if (!arrived()) return true;
        seen = count;
        since = now;
        timed = true;
        engine.schedule(key, now + limit);
        return false;
    }
};

// How take_due schedules its key for the earliest entry left: in place of the key's time (the
// first or only scan under the key), or only earlier than it (a later scan under the same key,
// which must not undo the time the first one set).
enum class Reschedule : std::uint8_t { replace, earlier_only };

// Waits that each have their own time under one deadline of their connection (the RTS of each
// large send, DeadlineKind::rendezvous): the keys of the entries of `waiting` due by `now`,
// deadline_of giving each value's time (time_point{}: it waits for nothing now, or is not this
// connection's). key is scheduled again for the earliest of the others, so one heap entry
// serves every RTS of a connection.
template <class Map, class DeadlineOf>
std::vector<typename Map::key_type> take_due(Deadlines& engine, DeadlineKey key,
                                             Deadlines::Clock::time_point now, const Map& waiting,
                                             DeadlineOf deadline_of,
                                             Reschedule how = Reschedule::replace) {
    using Clock = Deadlines::Clock;
    std::vector<typename Map::key_type> due;
    std::optional<Clock::time_point> next;
    for (const auto& entry : waiting) {
        const Clock::time_point at = deadline_of(entry.second);
        if (at == Clock::time_point{}) continue;
        if (at <= now)
            due.push_back(entry.first);
        else if (!next || at < *next)
            next = at;
    }
    if (next && how == Reschedule::replace) engine.schedule(key, *next);
    if (next && how == Reschedule::earlier_only) engine.schedule_by(key, *next);
    return due;
}

}  // namespace bmi::method::kit
