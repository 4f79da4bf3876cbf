// SPDX-License-Identifier: LGPL-2.1-or-later
// How long a busy-poll waits between two looks at shared memory.
//
// A consumer that reads the line a producer is writing takes it back in shared state, and the
// producer's next store into that line must fetch it again: a poll that looks too often makes
// each message cross between the cores more than once, so polls are spaced by a few pauses
// (the measured optimum: doc/perf/shm-notes.md). The pause instruction's length varies
// tenfold between x86 generations, hence a count measured once per process, not a constant.
#pragma once

namespace bmi::support {

// Spaces two polls (a few pause instructions where the CPU has them).
void poll_pause();

// How many pause instructions poll_pause() issues (measured on first use; at least 1).
int pauses_per_poll();

}  // namespace bmi::support
