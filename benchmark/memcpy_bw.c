/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ceiling for shared-memory transports: memcpy time and bandwidth per size, as a table. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pingpong_common.h"

#define BATCHES 10         /* timed batches per size; the best one is reported */
#define BATCH_MIN_US 500.0 /* a batch shorter than this is mostly clock overhead */
#define MAX_REPS (1u << 24)

/* Makes the compiler assume the buffers are read and written, so copies of a constant source
 * into an unread destination are neither merged nor dropped. */
static void clobber(void *dst, const void *src)
{
    __asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");
}

static double time_batch(void *dst, const void *src, uint64_t size, uint64_t reps)
{
    double t0 = pp_now_us();
    uint64_t r;
    for (r = 0; r < reps; r++) {
        memcpy(dst, src, (size_t)size);
        clobber(dst, src);
    }
    return pp_now_us() - t0;
}

/* Copies per batch: doubled until a batch lasts BATCH_MIN_US. This pass also warms the caches
 * and the TLB for this size, so no timed batch runs cold. */
static uint64_t calibrate(void *dst, const void *src, uint64_t size)
{
    uint64_t reps = 1;
    while (reps < MAX_REPS && time_batch(dst, src, size, reps) < BATCH_MIN_US)
        reps *= 2;
    return reps;
}

int main(int argc, char **argv)
{
    /* pingpong's option parser, posing as a client, so --min/--max and their defaults and
     * suffixes are the ones pingpong uses; --iters and --check are accepted and ignored. */
    static const char *const prefix[] = {"--client", "memcpy", NULL};
    struct pp_options o;
    unsigned char *src, *dst;
    struct pp_copy_table table = {0, 0, 0};
    uint64_t size;
    int rc;

    rc = pp_parse_posing(argc, argv, prefix, NULL, 0, &o);
    if (rc != 0)
        return rc;

    /* Two distinct allocations, so source and destination never share a cache line. */
    src = malloc((size_t)o.plan.max_size);
    dst = malloc((size_t)o.plan.max_size);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "memcpy_bw: cannot allocate 2 x %" PRIu64 " bytes\n", o.plan.max_size);
        return 1;
    }
    pp_fill(src, o.plan.max_size, 1);
    memset(dst, 0, (size_t)o.plan.max_size);

    printf("# memcpy: sizes %" PRIu64 "..%" PRIu64 " B, best of %d warm batches, each batch's "
           "mean per copy; iters = copies per batch x batches\n",
           o.plan.min_size, o.plan.max_size, BATCHES);
    printf("# %12s %8s %14s %14s\n", "bytes", "iters", "latency_us", "bw_MB/s");
    fflush(stdout);
    /* The size walk of pp_cursor_next: doubling from --min while it stays within --max. */
    for (size = o.plan.min_size;; size *= 2) {
        uint64_t reps = calibrate(dst, src, size);
        double best = 0;
        int b;
        for (b = 0; b < BATCHES; b++) {
            double t = time_batch(dst, src, size, reps);
            if (b == 0 || t < best)
                best = t;
        }
        pp_copy_row(&table, size, reps * BATCHES, best / (double)reps);
        if (size > o.plan.max_size / 2)
            break;
    }
    pp_copy_done(&table);
    free(dst);
    free(src);
    return 0;
}
