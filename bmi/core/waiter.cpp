// SPDX-License-Identifier: LGPL-2.1-or-later
// The test family (test, testsome, testcontext, testunexpected) and the progress loop behind it.
//
// Every test call first looks for something to report, then drives one non-blocking progress
// pass over all methods (folded into the sleep in direct mode), looks again, and only then
// sleeps on the wait point, for at most the caller's idle time. Anything completing wakes it
// at once (WaitPoint::signal), so the idle time is a cap, never a delay.
#include "bmi/core/waiter.hpp"

#include <algorithm>
#include <utility>

namespace bmi::core {

void Waiter::progress_all(bool spin_follows) {
    // Several methods in the shared set: one look at it tells which fds are readable, and a
    // quiet method skips the epoll_wait on its own set. One method: its own look is the one.
    const bool selective = methods_.direct_index() < 0 && methods_.active_count() > 1;
    WaitPoint::ReadyFds ready;
    // Before a spin the look is left out on most passes, as in direct mode, where no pass
    // precedes the spin: a readable fd waits at most one spin (the sleep after it looks), and
    // the counter bounds how many successful spins in a row may pass it by.
    if (selective) {
        const int passes = passes_without_look_.load(std::memory_order_relaxed) + 1;
        const bool look = !spin_follows || passes >= look_every_passes;
        passes_without_look_.store(look ? 0 : passes, std::memory_order_relaxed);
        if (look) ready = wait_point_.ready_fds();
    }
    for (auto& slot : methods_.slots()) {
        if (!slot->active.load(std::memory_order_acquire)) continue;
        support::MutexLock lock(slot->lock);
        if (!selective)
            slot->method->progress_polling();  // the only method, and no look told us anything
        else if (!ready.contains(slot->method->wait_fd()))
            slot->method->progress_without_events();
        else
            slot->method->progress();
    }
}

bool Waiter::before_sleep_all(SleepClock& clock, std::uint64_t seen) {
    const int direct = methods_.direct_index();
    bool moved = false;
    for (std::size_t i = 0; i < methods_.slots().size(); ++i) {
        MethodSlot& slot = *methods_.slots()[i];
        if (!slot.active.load(std::memory_order_acquire)) continue;
        support::MutexLock lock(slot.lock);
        if (slot.method->before_sleep()) {
            moved = true;
            continue;
        }
        // Read under the method's lock: a second thread marks itself before it takes that
        // lock, so once it holds it no sleep in a read starts that it could not end.
        // (Method::sleep_in_read)
        const bool allowed = static_cast<int>(i) == direct &&
                             !many_callers_.load(std::memory_order_relaxed) &&
                             wait_point_.sequence() == seen;
        if (!clock.fresh) clock.read();
        if (slot.method->sleep_in_read(clock.now, clock.deadline, allowed)) moved = true;
    }
    return moved;
}

void Waiter::note_new_caller() {
    const void* none = nullptr;
    if (!sole_caller_.compare_exchange_strong(none, support::this_thread_token()))
        many_callers_.store(true, std::memory_order_relaxed);
}

template <class Ready, class Settled>
void Waiter::wait_for(int max_idle_ms, Ready&& ready, Settled&& settled,
                      std::optional<std::uint64_t> seen_before) {
    note_caller();
    // The clock is read once per sleep, not per call: a test that finds its answer at once,
    // or in the methods' spin, reads none (on some VMs a clock read costs as much as a small
    // message).
    SleepClock clock{max_idle_ms};
    bool just_polled = false;  // the last sleep left nothing for a progress pass
    bool fd_seen = false;      // the last sleep ended on a readable fd, or in another thread
    // Taken out of the optional once: gcc's TSan build reads its payload as maybe unset.
    bool look_left_out = seen_before.has_value();
    const std::uint64_t sequence_before = seen_before.value_or(0);
    for (;;) {
        if (settled()) return;
        // OrangeFS looks at its forget list in BMI_testunexpected only; every test call does
        // here, so a server that sleeps in testcontext frees departed clients as soon.
        addresses_.drop_gone_peers();
        methods_.serve_same_node_if_asked();
        // The first look left out: whatever was reported since seen_before moved the sequence,
        // so the sleep below will not outlast it, and no state lock is taken to find nothing.
        std::uint64_t seen = sequence_before;
        if (!std::exchange(look_left_out, false)) {
            seen = wait_point_.sequence();
            support::MutexLock lock(state_mutex_);
            if (ready()) return;
        }
        // The first round may sleep if the caller allows any idle time; a later one only
        // while its deadline has not passed.
        clock.fresh = false;
        bool sleeping = max_idle_ms > 0;
        if (sleeping && clock.deadline != WaitPoint::Clock::time_point{}) {
            clock.read();
            sleeping = clock.now < clock.deadline;
        }
        // A sleep that ran out has just looked at every method's fd: return at once.
        if (!sleeping && std::exchange(just_polled, false)) return;
        // In direct mode a sleep on the method's epoll set returns at once with whatever is
        // ready and feeds it to the method, so a separate polling pass would only cost an
        // extra epoll_wait. Without a sleep (idle 0), or with several methods, poll.
        if (!sleeping || methods_.direct_index() < 0) {
            progress_all(sleeping && !fd_seen);
            if (settled()) return;
            {
                support::MutexLock lock(state_mutex_);
                if (ready()) return;
            }
        }
        if (!sleeping) return;
        // Last chance for work that costs no system call (shared memory rings); the methods
        // also arm their peers' wake-ups here.
        just_polled = false;
        // A completion handed to this thread there moves no sequence, so a method that made
        // one without saying so must not send us to sleep on it (test()'s own look).
        if (before_sleep_all(clock, seen) || settled()) continue;
        if (!clock.fresh) clock.read();
        just_polled =
            wait_point_.wait(seen, clock.now, clock.deadline,
                             [this](std::span<const epoll_event> events) { wake_all(events); });
        fd_seen = !just_polled;
    }
}

void Waiter::wake_all(std::span<const epoll_event> events) {
    const int direct = methods_.direct_index();
    if (direct < 0) {
        // The shared set: each method undoes its sleep preparations, and one whose fd the
        // sleep found readable makes its progress in the same lock section.
        for (auto& slot : methods_.slots()) {
            if (!slot->active.load(std::memory_order_acquire)) continue;
            support::MutexLock lock(slot->lock);
            slot->method->after_wake();
            const int fd = slot->method->wait_fd();
            if (std::any_of(events.begin(), events.end(),
                            [fd](const epoll_event& e) { return e.data.fd == fd; }))
                slot->method->progress();
        }
        return;
    }
    // Direct mode: one method, so one lock section both undoes its sleep preparations and
    // hands it the events the sleep returned (none: its timers and rings are still looked
    // at); the loop then looks again without another progress pass.
    MethodSlot& slot = methods_.slot(direct);
    support::MutexLock lock(slot.lock);
    slot.method->after_wake();
    slot.method->progress_events(events);
}

int Waiter::test(bmi_op_id_t id, bmi_context_id context, int max_idle_ms, int& outcount,
                 Completion& out) {
    outcount = 0;
    int rc = 0;
    method::Operation* done = nullptr;
    wait_for(
        max_idle_ms,
        [&] {
            ops_.assert_held();  // wait_for calls this under the state lock
            if (!ops_.context_valid_locked(context)) {
                rc = -BMI_EINVAL;
                return true;
            }
            method::Operation* op = ops_.find_locked(id, context);
            if (op == nullptr) {
                rc = -BMI_EINVAL;
                return true;
            }
            if (!op->completed) {
                // If this thread's own progress completes it, it is handed over directly.
                ops_.await_locked(*op);
                return false;
            }
            out = ops_.reap_locked(*op);
            done = op;
            return true;
        },
        [this] { return ops_.reaped_for_caller() != nullptr; }, ops_.await_posted(id, context));
    if (method::Operation* reaped = ops_.reaped_for_caller()) {
        out = OpTable::completion_of(*reaped);
        done = reaped;
    }
    OpTable::end_wait();
    if (done != nullptr) {
        OpTable::free_op(done);
        outcount = 1;
    }
    return rc;
}

int Waiter::testsome(std::span<const bmi_op_id_t> ids, bmi_context_id context, int max_idle_ms,
                     int& outcount, std::span<int> indices, std::span<Completion> out) {
    outcount = 0;
    int rc = 0;
    std::vector<method::Operation*> done;
    wait_for(max_idle_ms, [&] {
        ops_.assert_held();  // wait_for calls this under the state lock
        if (!ops_.context_valid_locked(context)) {
            rc = -BMI_EINVAL;
            return true;
        }
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] == 0) continue;  // OrangeFS callers leave holes in the array
            method::Operation* op = ops_.find_locked(ids[i], context);
            if (op == nullptr) {
                rc = -BMI_EINVAL;
                return true;
            }
        }
        for (std::size_t i = 0; i < ids.size() && static_cast<std::size_t>(outcount) < out.size();
             ++i) {
            if (ids[i] == 0) continue;
            method::Operation* op = ops_.find_locked(ids[i], context);
            if (op == nullptr || !op->completed) continue;
            out[static_cast<std::size_t>(outcount)] = ops_.reap_locked(*op);
            indices[static_cast<std::size_t>(outcount)] = static_cast<int>(i);
            ++outcount;
            done.push_back(op);
        }
        return outcount > 0;
    });
    for (auto* op : done) OpTable::free_op(op);
    return rc;
}

int Waiter::testcontext(bmi_context_id context, int max_idle_ms, int& outcount,
                        std::span<Completion> out) {
    outcount = 0;
    int rc = 0;
    std::vector<method::Operation*> done;
    wait_for(max_idle_ms, [&] {
        ops_.assert_held();  // wait_for calls this under the state lock
        if (!ops_.context_valid_locked(context)) {
            rc = -BMI_EINVAL;
            return true;
        }
        ops_.reap_context_locked(context, out, outcount, done);
        if (outcount > 0) return true;
        // An unexpected message that no test call has reported ends a waiting testcontext
        // early, with nothing, as both BMIs' tcp methods do: a loop of testunexpected(0) and
        // testcontext(t) (Mercury's) would otherwise see a request only after t. Each
        // arrival ends one wait, so a program that ignores its unexpected messages does not
        // spin.
        inbox_.assert_held();  // the same lock
        return max_idle_ms > 0 && inbox_.announce_locked();
    });
    for (auto* op : done) OpTable::free_op(op);
    return rc;
}

int Waiter::testunexpected(int max_idle_ms, int& outcount, std::span<UnexpectedMessage> out,
                           std::optional<std::uint8_t> msg_class) {
    outcount = 0;
    const bool count_references = (methods_.flags() & BMI_AUTO_REF_COUNT) != 0;
    wait_for(max_idle_ms, [&] {
        inbox_.assert_held();  // wait_for calls this under the state lock
        outcount = inbox_.take_locked(addresses_, count_references, out, msg_class);
        return outcount > 0;
    });
    return 0;
}

}  // namespace bmi::core
