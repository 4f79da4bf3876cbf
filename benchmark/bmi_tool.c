/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE

#include "bmi_tool.h"

#include <sched.h>
#include <stdio.h>

#include "pingpong_common.h"

void bt_pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

int bt_finish(const char *tool, int posted, bmi_op_id_t id, bmi_context_id ctx, const char *what)
{
    int outcount = 0;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    void *user = NULL;
    double deadline = pp_now_us() + 10e6;
    if (posted == 1)
        return 0;
    while (posted == 0 && pp_now_us() < deadline) {
        if (BMI_test(id, &outcount, &error, &actual, &user, 100, ctx) < 0)
            break;
        if (outcount == 1 && error == 0)
            return 0;
        if (outcount == 1)
            break;
    }
    fprintf(stderr, "%s: %s failed (%d, %d)\n", tool, what, posted, (int)error);
    return -1;
}
