/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The real limit of a one-copy transport between two processes (issue 41, item 2): a buffer
 * that one CPU has just written is copied by another CPU into a buffer that this second CPU
 * then reads, as a message moves from a sender's buffer into a receiver's. Only the copy is
 * timed, so the table is a ceiling no transport that copies once can pass in that placement;
 * memcpy_bw's warm copy on one CPU is the higher ceiling nobody between two cores reaches.
 *
 * Two threads of one process: the writer on CPU A, the copier on CPU B (`--cpus A,B`; A,A is
 * the one-core placement; without --cpus the scheduler places them). They hand the buffer over
 * through one atomic word; a waiting thread yields, so the one-core placement works too. */
#define _GNU_SOURCE

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pingpong_common.h"

#define TOOL "handoff_copy_bw"
/* Per size: at least 4 copies, and then until 20 ms of copying or, for small sizes whose
 * hand-overs cost more than their copies, 100 ms of rounds. */
#define MIN_TIMED_US 20000.0
#define MAX_ROUNDS_US 100000.0
#define MIN_COPIES 4u
#define WARM_COPIES 2u

enum turn
{
    WRITER = 0,
    COPIER = 1,
    DONE = 2
};

struct handoff
{
    unsigned char *src, *dst;
    uint64_t size;
    atomic_int turn;
    uint64_t round;
    double copy_us;   /* the copier's timed copies of this size */
    uint64_t copies;  /* how many it timed */
    uint64_t checked; /* what the copier read back, stored so the reads are not dropped */
};

static int pin(pthread_t thread, int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return 0;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(thread, sizeof(set), &set);
}

/* Spins briefly, then yields: on one CPU the other thread needs it to make progress. */
static int wait_turn(struct handoff *h, int mine)
{
    unsigned spins = 0;
    int t;
    while ((t = atomic_load_explicit(&h->turn, memory_order_acquire)) != mine && t != DONE)
        if (++spins > 64)
            sched_yield();
    return t;
}

static void *writer(void *arg)
{
    struct handoff *h = arg;
    while (wait_turn(h, WRITER) == WRITER) {
        /* A fresh pattern per round: the copier never finds the bytes already in its cache. */
        memset(h->src, (int)(h->round & 0xff) | 1, (size_t)h->size);
        h->round++;
        atomic_store_explicit(&h->turn, COPIER, memory_order_release);
    }
    return NULL;
}

/* One round as the copier: waits for the written buffer, copies it (timed if `timed`), reads the
 * copy, hands the buffer back. */
static void copy_round(struct handoff *h, int timed)
{
    uint64_t sum = 0, i;
    double t0;
    wait_turn(h, COPIER);
    t0 = pp_now_us();
    memcpy(h->dst, h->src, (size_t)h->size);
    if (timed) {
        h->copy_us += pp_now_us() - t0;
        h->copies++;
    }
    for (i = 0; i < h->size; i += 64)
        sum += h->dst[i];
    h->checked += sum;
    atomic_store_explicit(&h->turn, WRITER, memory_order_release);
}

/* Frees both buffers and passes rc on: every way out of main goes through it. */
static int release(struct handoff *h, int rc)
{
    free(h->dst);
    free(h->src);
    return rc;
}

int main(int argc, char **argv)
{
    /* pingpong's option parser, posing as a client, so --min/--max and their defaults and
     * suffixes are the ones pingpong uses; --iters and --check are accepted and ignored. */
    static const char *const prefix[] = {"--client", "handoff", NULL};
    struct pp_options o;
    struct handoff h;
    pthread_t thread;
    struct pp_copy_table table = {0, 0, 0};
    int rc, writer_cpu = -1, copier_cpu = -1;

    rc = pp_take_cpus(&argc, &argv, TOOL, &writer_cpu, &copier_cpu);
    if (rc == 0)
        rc = pp_parse_posing(argc, argv, prefix, NULL, 0, &o);
    if (rc != 0)
        return rc;
    memset(&h, 0, sizeof(h));
    h.src = malloc((size_t)o.plan.max_size);
    h.dst = malloc((size_t)o.plan.max_size);
    if (h.src == NULL || h.dst == NULL) {
        fprintf(stderr, TOOL ": cannot allocate 2 x %" PRIu64 " bytes\n", o.plan.max_size);
        return release(&h, 1);
    }
    memset(h.dst, 0, (size_t)o.plan.max_size);
    atomic_init(&h.turn, COPIER); /* no size yet: the writer waits for the first hand-back */
    if (pthread_create(&thread, NULL, writer, &h) != 0) {
        perror(TOOL ": pthread_create");
        return release(&h, 1);
    }
    /* Both pinned before the first round, so a CPU we may not use ends the run here. */
    if (pin(thread, writer_cpu) != 0 || pin(pthread_self(), copier_cpu) != 0) {
        atomic_store_explicit(&h.turn, DONE, memory_order_release);
        pthread_join(thread, NULL);
        fprintf(stderr, TOOL ": --cpus wants two CPUs this process may use, A,B\n");
        return release(&h, 2);
    }

    printf("# handoff copy: sizes %" PRIu64 "..%" PRIu64 " B, writer on CPU %d, copier on CPU "
           "%d (-1: unpinned); per size the mean of the timed copies of a buffer the writer "
           "has just filled\n",
           o.plan.min_size, o.plan.max_size, writer_cpu, copier_cpu);
    printf("# %12s %8s %14s %14s\n", "bytes", "iters", "latency_us", "bw_MB/s");
    fflush(stdout);
    /* The size walk of pp_cursor_next: doubling from --min while it stays within --max. */
    for (uint64_t size = o.plan.min_size;; size *= 2) {
        double start;
        unsigned i;
        /* The writer waits for the copier's hand-back, so the size changes between rounds. */
        h.size = size;
        h.copy_us = 0;
        h.copies = 0;
        atomic_store_explicit(&h.turn, WRITER, memory_order_release);
        for (i = 0; i < WARM_COPIES; i++)
            copy_round(&h, 0);
        start = pp_now_us();
        while (h.copies < MIN_COPIES ||
               (h.copy_us < MIN_TIMED_US && pp_now_us() - start < MAX_ROUNDS_US))
            copy_round(&h, 1);
        /* The writer owns the turn again: wait for its buffer so no round is left half done. */
        wait_turn(&h, COPIER);
        pp_copy_row(&table, size, h.copies, h.copy_us / (double)h.copies);
        if (size > o.plan.max_size / 2)
            break;
    }
    atomic_store_explicit(&h.turn, DONE, memory_order_release);
    pthread_join(thread, NULL);
    pp_copy_done(&table);
    return release(&h, 0);
}
