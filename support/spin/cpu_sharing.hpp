// SPDX-License-Identifier: LGPL-2.1-or-later
// Whether another runnable task waits for the CPU we spin on.
//
// A busy-poll pays only while the peer runs elsewhere. When the peer (or any other task) shares
// our core, every microsecond we poll is one it cannot use to answer (issue 18;
// doc/perf/code-figures.md). sched_yield() tells the two cases apart: with nobody else
// runnable on our CPU it returns in well under a microsecond, otherwise the other task runs
// first, for at least a context switch and usually for its whole turn.
#pragma once

#include <chrono>

namespace bmi::support {

// Gives the CPU to any other runnable task on it and says how long that task kept it: zero if
// none took it: the yield lasted no longer than a bare system call can (cpu_shared_threshold),
// or it lasted longer but never switched to another task (the thread's context switch count,
// getrusage, did not move). A lone yield rarely takes longer (timer ticks, the hypervisor), and
// each such false alarm costs the next waits their spin (doc/perf/placement.md, "False alarms
// of the yield probe").
std::chrono::microseconds cpu_shared();

// The same probe around another way of giving up the CPU, so that a test can produce a long
// yield with a switch and one without (an interrupt or the hypervisor cannot be summoned).
std::chrono::microseconds cpu_shared_around(void (*yield)());

// Longer than an uncontended sched_yield() takes, bar rare hypervisor hiccups
// (doc/perf/code-figures.md), shorter than a switch to another task and back.
inline constexpr std::chrono::microseconds cpu_shared_threshold{4};

}  // namespace bmi::support
