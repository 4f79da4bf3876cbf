/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the small BMI tools that fork their own clients share (memalloc_pingpong,
 * beside_stream): pinning a process and waiting for one posted operation. */
#ifndef BMI_TOOL_H
#define BMI_TOOL_H

#include "bmi.h"

/* Pins the calling process to cpu; -1 leaves it where it is. */
void bt_pin(int cpu);

/* Waits for an operation; posted is what its post returned, taken before id is read (id is
 * set by the post, and C leaves the order of a call's arguments open). 0, or -1 after
 * reporting "TOOL: WHAT failed" when it fails or has not completed within 10 s. */
int bt_finish(const char *tool, int posted, bmi_op_id_t id, bmi_context_id ctx, const char *what);

#endif
