/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pingpong.c and raw_tcp_pingpong.c share, so both run one plan and print one format. */
#ifndef PINGPONG_COMMON_H
#define PINGPONG_COMMON_H

#include <stdint.h>

#define PP_MAGIC 0x50494e47u /* "PING" */
#define PP_MAX_SIZE (1ull << 30) /* largest message either side agrees to allocate */

/* Exit code for "this method is not built": Meson and run_loopback.sh read it as a skip. */
#define PP_EXIT_SKIP 77

/* The whole run, decided by the client and sent to the server before the first ping so both
 * walk the same sequence of message sizes and rounds. Host byte order: loopback and
 * same-architecture peers only. */
struct pp_plan
{
    uint32_t magic;
    uint32_t check; /* 1: patterns are filled and verified on both sides */
    uint64_t min_size;
    uint64_t max_size;
    uint64_t iters; /* timed rounds at small sizes; pp_rounds() scales it down for large ones */
};

struct pp_options
{
    int server;          /* --server, else --client */
    const char *addr;    /* listen address (server) or peer address (client) */
    const char *methods; /* --method-list; NULL for the raw tcp tool */
    int timeout_ms;      /* bound on every single wait */
    struct pp_plan plan;
};

/* Where the client or server stands in the plan. Rounds count warm-up first. */
struct pp_cursor
{
    uint64_t size;
    uint64_t round;  /* 0 .. warmup + timed - 1 */
    uint64_t warmup; /* untimed rounds at this size */
    uint64_t timed;  /* timed rounds at this size */
};

/* Returns 0, or an exit code after printing usage. with_methods enables --method-list. */
int pp_parse_options(int argc, char **argv, int with_methods, struct pp_options *out);

/* The first message of the plan; 0 if the plan is empty. */
int pp_cursor_start(struct pp_cursor *c, const struct pp_plan *plan);
/* Moves to the next message; 0 when the plan is finished. */
int pp_cursor_next(struct pp_cursor *c, const struct pp_plan *plan);
/* Seeds the pattern of one message, so a message from another round never verifies. */
uint64_t pp_seed(const struct pp_cursor *c);

void pp_fill(void *buf, uint64_t size, uint64_t seed);
/* Returns 0 when buf's checksum equals that of the pattern for seed. */
int pp_verify(const void *buf, uint64_t size, uint64_t seed);

double pp_now_us(void);

/* Sends size bytes from out and waits for the echo of the same size in in; 0 on success. */
typedef int (*pp_exchange_fn)(void *state, uint64_t size, void *out, void *in);

/* The client side of the plan: fills and verifies patterns (--check), times the rounds, and
 * prints the table (a '#' header, one row per size, a final '# done' line). out and in hold
 * plan.max_size bytes. Returns 0, or -1 after an exchange or a verification failed. */
int pp_run_client(const struct pp_options *o, const char *tool, void *out, void *in,
                  pp_exchange_fn exchange, void *state);

#endif /* PINGPONG_COMMON_H */
