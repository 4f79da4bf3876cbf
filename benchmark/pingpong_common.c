/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Options, size plan, patterns and table output shared by the benchmark drivers. */
#define _POSIX_C_SOURCE 200809L

#include "pingpong_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Above this size the number of timed rounds shrinks in proportion, so every size moves about
 * the same number of bytes and 64 MiB does not take a thousand round trips. The floor keeps the
 * largest sizes from resting on a handful of rounds: with 4 (as before), the 64 MiB ratio of
 * two regenerations of doc/PERFORMANCE.md an hour apart read 1.34 and 1.13 against the same
 * peer; 16 rounds of 64 MiB take about a quarter of a second. */
#define PP_FULL_ROUNDS_LIMIT (64u * 1024u)
#define PP_MIN_ROUNDS 16u
#define PP_MIN_WARMUP 10u

static int usage(FILE *to, const char *argv0, int flags)
{
    fprintf(to,
            "usage: %s --server [LISTEN_ADDR]%s\n"
            "       %s --client PEER_ADDR [--min BYTES] [--max BYTES] [--iters N] [--check]%s\n"
            "  common: [--timeout-ms MS]%s%s\n"
            "  BYTES take K, M or G (binary). Defaults: --min 1 --max 64M --iters 1000,\n"
            "  listen address tcp://127.0.0.1:0. The server prints 'ADDR <address>' first.\n%s%s",
            argv0, flags & PP_OPT_METHODS ? " [--forever]" : "", argv0,
            flags & PP_OPT_STREAMS ? "\n         [--mode latency|bandwidth|many] [--window N] "
                                     "[--clients N]"
                                   : "",
            flags & PP_OPT_METHODS ? " [--method-list bmi_tcp,... (default: the address's)]"
                                     " [--pause-ms MS] [--posted N]"
                                   : "",
            flags & PP_OPT_POLL ? " [--poll] [--framed]" : "",
            flags & PP_OPT_STREAMS
                ? "  latency: ping-pong; bandwidth: windows of --window messages (default 16),\n"
                  "  each acknowledged; many: --clients clients (default 2) stream at once and\n"
                  "  the server prints the aggregate table.\n"
                : "",
            flags & PP_OPT_POLL
                ? "  --poll (both ends): reads spin (MSG_DONTWAIT) instead of sleeping in read().\n"
                  "  --framed (both ends): each message carries a 32-byte header as bmi_tcp's\n"
                  "  frames do, written with it in one writev() and read apart before it.\n"
                : "");
    return 2;
}

static int parse_mode(const char *text, uint32_t *out)
{
    uint32_t m;
    for (m = PP_LATENCY; m <= PP_MANY; m++) {
        if (strcmp(text, pp_mode_name(m)) == 0) {
            *out = m;
            return 0;
        }
    }
    return -1;
}

const char *pp_mode_name(uint32_t mode)
{
    return mode == PP_LATENCY     ? "latency"
           : mode == PP_BANDWIDTH ? "bandwidth"
           : mode == PP_MANY      ? "many"
                                  : "?";
}

static int parse_u64(const char *text, uint64_t *out, int allow_suffix)
{
    char *end = NULL;
    unsigned long long v;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || text[0] == '-')
        return -1;
    if (allow_suffix && *end != '\0' && end[1] == '\0') {
        int shift = *end == 'K' || *end == 'k'   ? 10
                    : *end == 'M' || *end == 'm' ? 20
                    : *end == 'G' || *end == 'g' ? 30
                                                 : -1;
        if (shift < 0 || v > (UINT64_MAX >> shift))
            return -1;
        v <<= shift;
        end++;
    }
    if (*end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int count_words(const char *const *words)
{
    int n = 0;
    while (words != NULL && words[n] != NULL)
        n++;
    return n;
}

int pp_parse_posing(int argc, char **argv, const char *const *prefix, const char *const *suffix,
                    int flags, struct pp_options *out)
{
    int before = count_words(prefix), after = count_words(suffix), n = 0, i, rc;
    /* pp_parse_options reads its words and never writes them. */
    char **args = calloc((size_t)(argc + before + after + 1), sizeof(*args));
    if (args == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    args[n++] = argv[0];
    for (i = 0; i < before; i++)
        args[n++] = (char *)prefix[i];
    for (i = 1; i < argc; i++)
        args[n++] = argv[i];
    for (i = 0; i < after; i++)
        args[n++] = (char *)suffix[i];
    rc = pp_parse_options(n, args, flags, out);
    free(args);
    return rc;
}

int pp_ranks_needed(const struct pp_plan *plan)
{
    return plan->mode == PP_MANY ? (int)plan->clients + 1 : 2;
}

int pp_parse_options(int argc, char **argv, int flags, struct pp_options *o)
{
    uint64_t timeout = 30000, window = 16, clients = 0, pause = 0;
    int i, mode = 0;

    memset(o, 0, sizeof(*o));
    o->methods = NULL;
    o->with_streams = (flags & PP_OPT_STREAMS) != 0;
    o->plan.magic = PP_MAGIC;
    o->plan.min_size = 1;
    o->plan.max_size = 64u << 20;
    o->plan.iters = 1000;
    o->plan.mode = PP_LATENCY;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, argv[0], flags);
            exit(0); /* nothing started yet; also under mpirun, where every rank sees it */
        } else if (strcmp(a, "--server") == 0 || strcmp(a, "--client") == 0) {
            mode = a[2] == 's' ? 1 : 2;
            if (v != NULL && v[0] != '-')
                o->addr = argv[++i];
        } else if (strcmp(a, "--check") == 0) {
            o->plan.check = 1;
        } else if ((flags & PP_OPT_METHODS) && strcmp(a, "--forever") == 0) {
            o->forever = 1;
        } else if ((flags & PP_OPT_POLL) && strcmp(a, "--poll") == 0) {
            o->poll_reads = 1;
        } else if ((flags & PP_OPT_POLL) && strcmp(a, "--framed") == 0) {
            o->framed = 1;
        } else if (v == NULL) {
            bad = 1;
        } else if (strcmp(a, "--min") == 0) {
            bad = parse_u64(argv[++i], &o->plan.min_size, 1);
        } else if (strcmp(a, "--max") == 0) {
            bad = parse_u64(argv[++i], &o->plan.max_size, 1);
        } else if (strcmp(a, "--iters") == 0) {
            bad = parse_u64(argv[++i], &o->plan.iters, 0);
        } else if (strcmp(a, "--timeout-ms") == 0) {
            bad = parse_u64(argv[++i], &timeout, 0);
        } else if ((flags & PP_OPT_METHODS) && strcmp(a, "--method-list") == 0) {
            o->methods = argv[++i];
        } else if ((flags & PP_OPT_METHODS) && strcmp(a, "--pause-ms") == 0) {
            bad = parse_u64(argv[++i], &pause, 0) || pause > 600000;
        } else if ((flags & PP_OPT_METHODS) && strcmp(a, "--posted") == 0) {
            bad = parse_u64(argv[++i], &o->posted, 0) || o->posted > PP_MAX_POSTED;
        } else if ((flags & PP_OPT_STREAMS) && strcmp(a, "--mode") == 0) {
            bad = parse_mode(argv[++i], &o->plan.mode);
        } else if ((flags & PP_OPT_STREAMS) && strcmp(a, "--window") == 0) {
            bad = parse_u64(argv[++i], &window, 0);
        } else if ((flags & PP_OPT_STREAMS) && strcmp(a, "--clients") == 0) {
            bad = parse_u64(argv[++i], &clients, 0);
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "%s: bad argument %s%s%s\n", argv[0], a, v != NULL ? " " : "",
                    v != NULL && a[0] == '-' && strcmp(a, "--check") != 0 &&
                            strcmp(a, "--forever") != 0 && strcmp(a, "--poll") != 0 &&
                            strcmp(a, "--framed") != 0
                        ? v
                        : "");
            return usage(stderr, argv[0], flags);
        }
    }
    if (clients == 0)
        clients = o->plan.mode == PP_MANY ? 2 : 1;
    o->server = mode == 1;
    if (mode == 0 || (mode == 2 && o->addr == NULL) || o->plan.min_size == 0 ||
        o->plan.max_size < o->plan.min_size || o->plan.max_size > PP_MAX_SIZE ||
        o->plan.iters == 0 || timeout == 0 || timeout > 3600000 || window == 0 ||
        window > PP_MAX_WINDOW || clients > PP_MAX_CLIENTS ||
        (clients != 1 && o->plan.mode != PP_MANY)) {
        fprintf(stderr, "%s: missing role or peer, or a value out of range\n", argv[0]);
        return usage(stderr, argv[0], flags);
    }
    o->pause_ms = (int)pause;
    o->plan.window = (uint32_t)window;
    o->plan.clients = (uint32_t)clients;
    if (o->addr == NULL)
        o->addr = "tcp://127.0.0.1:0";
    if ((flags & PP_OPT_METHODS) && o->methods == NULL) {
        /* The method the address names, so "--server shm://x" needs no --method-list; in
         * "ofi+tcp://x" the method is ofi, tcp its provider. */
        const char *end = strstr(o->addr, "://");
        size_t n = end != NULL ? (size_t)(end - o->addr) : 0;
        const char *plus = memchr(o->addr, '+', n);
        if (plus != NULL)
            n = (size_t)(plus - o->addr);
        if (n == 0 || n + 5 > sizeof(o->address_method)) {
            fprintf(stderr, "%s: %s names no method (scheme://...)\n", argv[0], o->addr);
            return usage(stderr, argv[0], flags);
        }
        memcpy(o->address_method, "bmi_", 4);
        memcpy(o->address_method + 4, o->addr, n);
        o->address_method[4 + n] = '\0';
        o->methods = o->address_method;
    }
    o->timeout_ms = (int)timeout;
    return 0;
}

static void cursor_enter(struct pp_cursor *c, const struct pp_plan *plan, uint64_t size)
{
    uint64_t timed = plan->iters;
    if (size > PP_FULL_ROUNDS_LIMIT) {
        uint64_t floor = plan->iters < PP_MIN_ROUNDS ? plan->iters : PP_MIN_ROUNDS;
        timed = plan->iters / (size / PP_FULL_ROUNDS_LIMIT);
        if (timed < floor)
            timed = floor;
    }
    c->size = size;
    c->round = 0;
    c->timed = timed;
    /* A tenth of the timed rounds, at least PP_MIN_WARMUP (as the OSU benchmarks skip 10
     * rounds of a large size): the first rounds of a size touch fresh pages, and a library
     * that picks its large-message path by timing both (bmi shm) spends its first messages
     * of a size trying each. Both twins share this plan. */
    c->warmup = timed / 10 > PP_MIN_WARMUP ? timed / 10 : PP_MIN_WARMUP;
}

int pp_cursor_start(struct pp_cursor *c, const struct pp_plan *plan)
{
    if (plan->min_size == 0 || plan->max_size < plan->min_size || plan->iters == 0)
        return 0;
    cursor_enter(c, plan, plan->min_size);
    return 1;
}

int pp_cursor_next(struct pp_cursor *c, const struct pp_plan *plan)
{
    if (++c->round < c->warmup + c->timed)
        return 1;
    if (c->size > plan->max_size / 2)
        return 0;
    cursor_enter(c, plan, c->size * 2);
    return 1;
}

uint64_t pp_window(const struct pp_plan *plan, uint64_t size)
{
    uint64_t w = plan->window, fit = size > 0 ? PP_WINDOW_BYTES / size : 1;
    if (plan->mode == PP_LATENCY)
        return 1;
    if (fit < 1)
        fit = 1;
    return w < fit ? w : fit;
}

uint64_t pp_round_bytes(const struct pp_plan *plan)
{
    uint64_t size, best = 0;
    for (size = plan->min_size; size <= plan->max_size; size *= 2) {
        uint64_t b = pp_window(plan, size) * size;
        if (b > best)
            best = b;
        if (size > plan->max_size / 2)
            break;
    }
    return best;
}

uint64_t pp_seed(const struct pp_cursor *c)
{
    return c->size * 0x9e3779b97f4a7c15ull + c->round;
}

/* splitmix64: cheap, and every 8-byte word of a message differs. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void pp_fill(void *buf, uint64_t size, uint64_t seed)
{
    unsigned char *p = buf;
    uint64_t off;
    for (off = 0; off < size; off += 8) {
        uint64_t word = mix(seed + off / 8);
        memcpy(p + off, &word, size - off < 8 ? (size_t)(size - off) : 8);
    }
}

/* FNV-1a over 8-byte words (the tail zero-padded); sees any changed byte and its position. */
static uint64_t checksum_step(uint64_t h, uint64_t word)
{
    return (h ^ word) * 0x100000001b3ull;
}

int pp_verify(const void *buf, uint64_t size, uint64_t seed)
{
    const unsigned char *p = buf;
    uint64_t got = 0xcbf29ce484222325ull, want = got, off;
    for (off = 0; off < size; off += 8) {
        uint64_t word = 0, expect = mix(seed + off / 8);
        size_t n = size - off < 8 ? (size_t)(size - off) : 8;
        memcpy(&word, p + off, n);
        if (n < 8)
            memset((unsigned char *)&expect + n, 0, 8 - n);
        got = checksum_step(got, word);
        want = checksum_step(want, expect);
    }
    return got == want ? 0 : -1;
}

int pp_stream_plan_ok(const struct pp_plan *plan)
{
    struct pp_cursor c;
    return plan->magic == PP_MAGIC && pp_cursor_start(&c, plan) && plan->max_size <= PP_MAX_SIZE &&
           plan->mode <= PP_BANDWIDTH && plan->window >= 1 && plan->window <= PP_MAX_WINDOW;
}

int pp_verify_window(const struct pp_plan *plan, const struct pp_cursor *c, const void *buf,
                     const char *tool)
{
    uint64_t w = pp_window(plan, c->size), i;
    for (i = 0; plan->check && i < w; i++)
        if (pp_verify((const unsigned char *)buf + i * c->size, c->size, pp_seed(c)) != 0) {
            fprintf(stderr, "%s: checksum mismatch at %" PRIu64 " bytes\n", tool, c->size);
            return -1;
        }
    return 0;
}

double pp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int pp_take_cpus(int *argc, char ***argv, const char *tool, int *a, int *b)
{
    if (*argc > 2 && strcmp((*argv)[1], "--cpus") == 0) {
        if (sscanf((*argv)[2], "%d,%d", a, b) != 2 || *a < 0 || *b < 0) {
            fprintf(stderr, "%s: --cpus wants two CPUs this process may use, A,B\n", tool);
            return 2;
        }
        (*argv)[2] = (*argv)[0];
        *argc -= 2;
        *argv += 2;
    }
    return 0;
}

void pp_copy_row(struct pp_copy_table *t, uint64_t size, uint64_t iters, double latency_us)
{
    double bw = latency_us > 0 ? (double)size / latency_us : 0.0;
    printf("  %12" PRIu64 " %8" PRIu64 " %14.4f %14.4f\n", size, iters, latency_us, bw);
    fflush(stdout);
    if (bw > t->best_bw) {
        t->best_bw = bw;
        t->best_bw_size = (double)size;
    }
    t->rows++;
}

void pp_copy_done(const struct pp_copy_table *t)
{
    printf("# done: %d sizes, max bandwidth %.2f MB/s at %.0f B\n", t->rows, t->best_bw,
           t->best_bw_size);
}

static struct
{
    int rows;
    double best_bw, best_bw_size, min_lat, min_lat_size;
} summary;

static void print_header(const char *tool, const char *addr, const struct pp_plan *plan)
{
    printf("# %s: mode %s, peer %s, sizes %" PRIu64 "..%" PRIu64 " B, iters %" PRIu64
           ", window %u, clients %u, check %s\n",
           tool, pp_mode_name(plan->mode), addr, plan->min_size, plan->max_size, plan->iters,
           plan->mode == PP_LATENCY ? 1u : plan->window, plan->clients,
           plan->check ? "on (timings include pattern work)" : "off");
    printf("# %12s %8s %14s %14s\n", "bytes", "iters", "latency_us", "bw_MB/s");
    fflush(stdout);
}

/* latency_us is the time per one-way message: half a round trip in PP_LATENCY mode, the
 * streaming time divided by the messages of all clients otherwise; bw_MB/s is bytes moved in
 * one direction per microsecond. */
static void print_row(const struct pp_cursor *c, double messages_per_round, double elapsed_us)
{
    double latency = elapsed_us / (double)c->timed / messages_per_round;
    double bw = latency > 0 ? (double)c->size / latency : 0.0;
    /* Four decimals keep a slow 1-byte exchange from printing a bandwidth of 0. */
    printf("  %12" PRIu64 " %8" PRIu64 " %14.2f %14.4f\n", c->size, c->timed, latency, bw);
    fflush(stdout);
    if (summary.rows == 0 || latency < summary.min_lat) {
        summary.min_lat = latency;
        summary.min_lat_size = (double)c->size;
    }
    if (summary.rows == 0 || bw > summary.best_bw) {
        summary.best_bw = bw;
        summary.best_bw_size = (double)c->size;
    }
    summary.rows++;
}

static void print_footer(void)
{
    printf("# done: %d sizes, min latency %.2f us at %.0f B, max bandwidth %.2f MB/s at %.0f B\n",
           summary.rows, summary.min_lat, summary.min_lat_size, summary.best_bw,
           summary.best_bw_size);
    fflush(stdout);
}

int pp_run_client(const struct pp_options *o, const char *tool, void *out, void *in,
                  pp_exchange_fn exchange, pp_stream_fn stream, void *state)
{
    const int report = o->plan.mode != PP_MANY;
    struct pp_cursor c;
    double t0 = 0;
    int more;

    if (o->plan.mode != PP_LATENCY && stream == NULL) {
        fprintf(stderr, "%s: mode %s is not supported\n", tool, pp_mode_name(o->plan.mode));
        return -1;
    }
    /* A buffer never written maps the kernel's one shared zero page, which no real sender's
     * data does; it would make a copy out of it cheaper than any application's. */
    if (!o->plan.check)
        pp_fill(out, o->plan.max_size, 0);
    if (report)
        print_header(tool, o->addr, &o->plan);
    for (more = pp_cursor_start(&c, &o->plan); more; more = pp_cursor_next(&c, &o->plan)) {
        uint64_t window = pp_window(&o->plan, c.size);
        if (o->plan.check)
            pp_fill(out, c.size, pp_seed(&c));
        if (c.round == c.warmup)
            t0 = pp_now_us();
        if (o->plan.mode == PP_LATENCY) {
            if (exchange(state, c.size, out, in) != 0)
                return -1;
            if (o->plan.check && pp_verify(in, c.size, pp_seed(&c)) != 0) {
                fprintf(stderr, "%s: checksum mismatch at %" PRIu64 " bytes, round %" PRIu64 "\n",
                        tool, c.size, c.round);
                return -1;
            }
        } else if (stream(state, c.size, window, out) != 0) {
            return -1;
        }
        if (report && c.round + 1 == c.warmup + c.timed)
            print_row(&c, o->plan.mode == PP_LATENCY ? 2.0 : (double)window, pp_now_us() - t0);
    }
    if (report)
        print_footer();
    return 0;
}

int pp_run_server(const struct pp_plan *plan, const char *tool, const char *addr,
                  const struct pp_server_ops *ops)
{
    const int report = plan->mode == PP_MANY;
    struct pp_cursor c, next;
    uint64_t rounds = 0;
    double t0 = 0;
    int more = pp_cursor_start(&c, plan);

    if (report)
        print_header(tool, addr, plan);
    for (; more; c = next, rounds++) {
        if (c.round == c.warmup)
            t0 = pp_now_us();
        if (ops->receive(ops->state, &c) != 0)
            return -1;
        next = c;
        more = pp_cursor_next(&next, plan);
        if (ops->reply(ops->state, &c, more ? &next : NULL) != 0)
            return -1;
        if (report && c.round + 1 == c.warmup + c.timed)
            print_row(&c, (double)pp_window(plan, c.size) * plan->clients, pp_now_us() - t0);
    }
    if (report)
        print_footer();
    fprintf(stderr, "%s: server finished %" PRIu64 " rounds\n", tool, rounds);
    return 0;
}
