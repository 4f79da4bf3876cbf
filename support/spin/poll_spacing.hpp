// SPDX-License-Identifier: LGPL-2.1-or-later
// How long a busy-poll waits between two looks at shared memory.
//
// A consumer that reads the line a producer is writing takes it back in shared state, and the
// producer's next store into that line must fetch it again: a poll that looks too often makes
// each message cross between the cores more than once. Measured on a Sapphire Rapids VM with
// 8-byte shm ping-pongs (pause ~11 ns there): one pause per poll 279 ns one way, two 265,
// three 261, four 270, six 283. So polls are spaced by about 30 ns. The pause instruction's
// length varies tenfold between x86 generations (about 10 ns to 140 cycles), hence a count
// measured once per process instead of a constant.
#pragma once

namespace bmi::support {

// Spaces two polls (a few pause instructions where the CPU has them).
void poll_pause();

// How many pause instructions poll_pause() issues (measured on first use; at least 1).
int pauses_per_poll();

}  // namespace bmi::support
