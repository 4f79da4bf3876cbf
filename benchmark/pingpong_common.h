/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the benchmark drivers share (pingpong.c over BMI, mpi_pingpong.c over MPI, the raw
 * baselines), so all of them run one plan and print one format, by construction. */
#ifndef PINGPONG_COMMON_H
#define PINGPONG_COMMON_H

#include <stdint.h>

#define PP_MAGIC 0x50494e47u     /* "PING" */
#define PP_MAX_SIZE (1ull << 30) /* largest message either side agrees to allocate */
#define PP_MAX_WINDOW 1024u      /* messages in flight per client in the streaming modes */
#define PP_MAX_CLIENTS 64u
#define PP_MAX_POSTED 1000000u /* --posted: idle receives the server keeps */
/* The streaming modes keep at most this many bytes in flight per client (at least one
 * message), so a 64 MiB window of 16 does not need a gigabyte per side. */
#define PP_WINDOW_BYTES (16ull << 20)

/* What one round of the plan is. */
enum pp_mode
{
    PP_LATENCY = 0,   /* one message each way; the client reports */
    PP_BANDWIDTH = 1, /* the client streams a window of messages, the server acks the window */
    PP_MANY = 2       /* like PP_BANDWIDTH from every one of plan.clients; the server reports */
};

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
    uint64_t iters;   /* timed rounds at small sizes; pp_rounds() scales it down for large ones */
    uint32_t mode;    /* enum pp_mode */
    uint32_t window;  /* messages per round and client in the streaming modes (see pp_window) */
    uint32_t clients; /* PP_MANY: how many clients the server waits for; else 1 */
    uint32_t pad;
};

struct pp_options
{
    int server;              /* --server, else --client */
    const char *addr;        /* listen address (server) or peer address (client) */
    const char *methods;     /* --method-list, else the address's own; NULL for the raw tcp tool */
    char address_method[32]; /* "bmi_<scheme>" of addr, where methods points by default */
    int with_streams;        /* the tool has the streaming modes (--mode, --window, --clients) */
    int timeout_ms;          /* bound on every single wait */
    int forever;     /* --forever: the BMI server answers one client (or group) after another */
    int pause_ms;    /* --pause-ms: the BMI client idles this long after the hello, so an
                        observer can measure the server's CPU use while it waits */
    uint64_t posted; /* --posted N: the BMI server keeps N receives posted toward its client
                        on tags nobody sends (the posted study) */
    int poll_reads;  /* --poll (raw TCP): reads spin with MSG_DONTWAIT instead of sleeping */
    int framed;      /* --framed (raw TCP): a 32-byte header before each message */
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

#define PP_OPT_METHODS 1 /* --method-list (BMI) */
#define PP_OPT_STREAMS 2 /* --mode, --window, --clients */
#define PP_OPT_POLL 4    /* --poll and --framed (raw TCP) */
/* Returns 0, or an exit code after printing usage. flags: PP_OPT_* the tool understands. */
int pp_parse_options(int argc, char **argv, int flags, struct pp_options *out);
/* For tools with no address of their own (MPI ranks, memcpy, eventfd): parses the words of
 * prefix, then argv[1..], then the words of suffix (both NULL-terminated, may be NULL) as
 * pp_parse_options would, so defaults, size suffixes and limits stay pingpong's. Same result. */
int pp_parse_posing(int argc, char **argv, const char *const *prefix, const char *const *suffix,
                    int flags, struct pp_options *out);
/* A leading "--cpus A,B" (two CPU numbers): stored in *a and *b and taken off argv (argv[0]
 * kept); 0, or exit status 2 after a message naming tool. Without it *a and *b stay as given. */
int pp_take_cpus(int *argc, char ***argv, const char *tool, int *a, int *b);
/* Processes a plan needs under mpirun: the server and one per client. */
int pp_ranks_needed(const struct pp_plan *plan);

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

/* The table of a copy tool (memcpy_bw, handoff_copy_bw): a row per size, in pingpong's
 * columns with more decimals (a small copy takes nanoseconds), and the "# done" line. */
struct pp_copy_table
{
    int rows;
    double best_bw, best_bw_size;
};
void pp_copy_row(struct pp_copy_table *t, uint64_t size, uint64_t iters, double latency_us);
void pp_copy_done(const struct pp_copy_table *t);

/* For the one-client baselines over a byte stream (raw TCP, TLS): whether the plan the client
 * sent is one they run (latency or bandwidth, sizes and window within bounds). */
int pp_stream_plan_ok(const struct pp_plan *plan);
/* With plan->check, verifies the window of round c, its messages back to back in buf; 0, or -1
 * after a message naming tool. */
int pp_verify_window(const struct pp_plan *plan, const struct pp_cursor *c, const void *buf,
                     const char *tool);

/* Messages per round and client at this size: plan.window capped by PP_WINDOW_BYTES, 1 in
 * PP_LATENCY mode. */
uint64_t pp_window(const struct pp_plan *plan, uint64_t size);
/* The largest window(size) * size of the plan: what one client's round needs in buffers. */
uint64_t pp_round_bytes(const struct pp_plan *plan);
const char *pp_mode_name(uint32_t mode);

/* Sends size bytes from out and waits for the echo of the same size in in; 0 on success. */
typedef int (*pp_exchange_fn)(void *state, uint64_t size, void *out, void *in);
/* Sends window messages of size bytes, all from out, then waits for the server's ack. */
typedef int (*pp_stream_fn)(void *state, uint64_t size, uint64_t window, void *out);

/* The client side of the plan: fills and verifies patterns (--check), times the rounds, and
 * prints the table (a '#' header, one row per size, a final '# done' line) except in PP_MANY
 * mode, where the server reports. out and in hold plan.max_size bytes; stream may be NULL for
 * a tool without the streaming modes. Returns 0, or -1 after an exchange or a verification
 * failed. */
int pp_run_client(const struct pp_options *o, const char *tool, void *out, void *in,
                  pp_exchange_fn exchange, pp_stream_fn stream, void *state);

/* The server side, one round at a time: receive takes in (and with plan.check verifies) every
 * message of round c from every client; reply answers them (the echo or the acks), and may
 * post the receives of next first (NULL after the last round). */
struct pp_server_ops
{
    void *state;
    int (*receive)(void *state, const struct pp_cursor *c);
    int (*reply)(void *state, const struct pp_cursor *c, const struct pp_cursor *next);
};

/* Walks the plan with ops; in PP_MANY mode times the rounds and prints the table, the
 * aggregate over all clients. addr is the listen address for the header. */
int pp_run_server(const struct pp_plan *plan, const char *tool, const char *addr,
                  const struct pp_server_ops *ops);

#endif /* PINGPONG_COMMON_H */
