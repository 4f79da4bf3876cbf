// SPDX-License-Identifier: LGPL-2.1-or-later
// The waiting code of an instance: the test family (test, testsome, testcontext,
// testunexpected) and the progress loop behind it, which drives the methods and sleeps on the
// instance's WaitPoint. It holds no method's lock while it sleeps, and the state lock only
// while it looks for something to report.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <span>

#include "bmi/core/address_book.hpp"
#include "bmi/core/instance_types.hpp"
#include "bmi/core/method_set.hpp"
#include "bmi/core/op_table.hpp"
#include "bmi/core/unexpected_inbox.hpp"
#include "bmi/core/wait_point.hpp"
#include "support/sync/mutex.hpp"
#include "support/sync/thread_token.hpp"

namespace bmi::core {

class Waiter {
public:
    Waiter(support::Mutex& state, WaitPoint& wait_point, MethodSet& methods, AddressBook& addresses,
           OpTable& ops, UnexpectedInbox& inbox)
        : state_mutex_(state),
          wait_point_(wait_point),
          methods_(methods),
          addresses_(addresses),
          ops_(ops),
          inbox_(inbox) {}
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;

    // The test family: outputs as in bmi.h; idle waits only while nothing is available.
    int test(bmi_op_id_t id, bmi_context_id context, int max_idle_ms, int& outcount,
             Completion& out);
    int testsome(std::span<const bmi_op_id_t> ids, bmi_context_id context, int max_idle_ms,
                 int& outcount, std::span<int> indices, std::span<Completion> out);
    // A waiting testcontext also returns, with outcount 0, once for each unexpected message
    // no test call has reported yet.
    int testcontext(bmi_context_id context, int max_idle_ms, int& outcount,
                    std::span<Completion> out);
    // msg_class: only messages of that class (the standalone dialect's _class calls);
    // nullopt: every class (OrangeFS's BMI_testunexpected, which knows no classes).
    int testunexpected(int max_idle_ms, int& outcount, std::span<UnexpectedMessage> out,
                       std::optional<std::uint8_t> msg_class);

    // Records the calling thread: once a second thread posts, cancels or waits, no method
    // sleeps in a read (Method::sleep_in_read), which only the first thread could end.
    // Inline: every post and test calls it, and the sole caller's own check is one load.
    void note_caller() {
        if (sole_caller_.load(std::memory_order_relaxed) != support::this_thread_token())
            note_new_caller();
    }

private:
    // The slow half of note_caller: a thread not yet recorded as the sole caller.
    void note_new_caller();

    // One progress pass over every active method; spin_follows: the caller is about to sleep,
    // so the methods' spin comes next (see the definition).
    void progress_all(bool spin_follows);
    static constexpr int look_every_passes = 16;
    // The clock of one wait (wait_for), read only once a sleep is near: a wait that a method's
    // spin ends reads none (a reading is a sizeable part of an shm message; figures in
    // doc/perf/code-figures.md).
    struct SleepClock {
        int max_idle_ms = 0;
        WaitPoint::Clock::time_point now{};
        WaitPoint::Clock::time_point deadline{};  // set by the first reading
        bool fresh = false;                       // now was read in this round of the wait
        void read() {
            now = WaitPoint::Clock::now();
            if (deadline == WaitPoint::Clock::time_point{})
                deadline = now + std::chrono::milliseconds(max_idle_ms);
            fresh = true;
        }
    };
    // The sleep protocol of methods/method.hpp (before_sleep, then sleep_in_read): true if a
    // method moved something instead. Reads the clock before offering a sleep in a read.
    // `seen`: the sequence the sleep will wait on; a sleep in a read is offered only while it
    // has not moved, since nothing else can end that read.
    bool before_sleep_all(SleepClock& clock, std::uint64_t seen);
    // Run by the thread that slept, with the ready events of the direct-mode method, if any.
    void wake_all(std::span<const epoll_event> events);
    // Loops until ready() (called with the state lock held) is true or max_idle_ms passed.
    // settled(), asked without the lock before each look and each sleep, ends the wait as
    // well. With seen_before (a sequence of the wait point read before anything ready() looks
    // for could have been reported), the first look is left out.
    template <class Ready, class Settled>
    void wait_for(int max_idle_ms, Ready&& ready, Settled&& settled,
                  std::optional<std::uint64_t> seen_before = std::nullopt);
    template <class Ready>
    void wait_for(int max_idle_ms, Ready&& ready) {
        wait_for(max_idle_ms, ready, [] { return false; });
    }

    support::Mutex& state_mutex_;  // the instance's state lock
    WaitPoint& wait_point_;
    MethodSet& methods_;
    AddressBook& addresses_;
    OpTable& ops_;
    UnexpectedInbox& inbox_;
    std::atomic<const void*> sole_caller_{nullptr};  // the first thread to post, cancel or wait
    std::atomic<bool> many_callers_{false};          // another one has since
    // Passes since the shared set was last looked at before a spin; approximate with many
    // threads, which is all it needs to be.
    std::atomic<int> passes_without_look_{0};
};

}  // namespace bmi::core
