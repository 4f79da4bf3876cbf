/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Options, size plan, patterns and table output shared by the two ping-pong tools. */
#define _POSIX_C_SOURCE 200809L

#include "pingpong_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Above this size the number of timed rounds shrinks in proportion, so every size moves about
 * the same number of bytes and 64 MiB does not take a thousand round trips. */
#define PP_FULL_ROUNDS_LIMIT (64u * 1024u)
#define PP_MIN_ROUNDS 4u

static int usage(const char *argv0, int with_methods)
{
    fprintf(stderr,
            "usage: %s --server [LISTEN_ADDR]\n"
            "       %s --client PEER_ADDR [--min BYTES] [--max BYTES] [--iters N] [--check]\n"
            "  common: [--timeout-ms MS]%s\n"
            "  BYTES take K, M or G (binary). Defaults: --min 1 --max 64M --iters 1000,\n"
            "  listen address tcp://127.0.0.1:0. The server prints 'ADDR <address>' first.\n",
            argv0, argv0, with_methods ? " [--method-list bmi_tcp,...]" : "");
    return 2;
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
        int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                  : *end == 'G' || *end == 'g' ? 30 : -1;
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

int pp_parse_options(int argc, char **argv, int with_methods, struct pp_options *o)
{
    uint64_t timeout = 30000;
    int i, mode = 0;

    memset(o, 0, sizeof(*o));
    o->methods = with_methods ? "bmi_tcp" : NULL;
    o->plan.magic = PP_MAGIC;
    o->plan.min_size = 1;
    o->plan.max_size = 64u << 20;
    o->plan.iters = 1000;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--server") == 0 || strcmp(a, "--client") == 0) {
            mode = a[2] == 's' ? 1 : 2;
            if (v != NULL && v[0] != '-')
                o->addr = argv[++i];
        } else if (strcmp(a, "--check") == 0) {
            o->plan.check = 1;
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
        } else if (with_methods && strcmp(a, "--method-list") == 0) {
            o->methods = argv[++i];
        } else {
            bad = 1;
        }
        if (bad)
            return usage(argv[0], with_methods);
    }
    o->server = mode == 1;
    if (mode == 0 || (mode == 2 && o->addr == NULL) || o->plan.min_size == 0 ||
        o->plan.max_size < o->plan.min_size || o->plan.max_size > PP_MAX_SIZE ||
        o->plan.iters == 0 || timeout == 0 || timeout > 3600000)
        return usage(argv[0], with_methods);
    if (o->addr == NULL)
        o->addr = "tcp://127.0.0.1:0";
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
    c->warmup = timed / 10 > 0 ? timed / 10 : 1;
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

double pp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static struct
{
    int rows;
    double best_bw, best_bw_size, min_lat, min_lat_size;
} summary;

static void print_header(const char *tool, const struct pp_options *o)
{
    printf("# %s: peer %s, sizes %" PRIu64 "..%" PRIu64 " B, iters %" PRIu64 ", check %s\n",
           tool, o->addr, o->plan.min_size, o->plan.max_size, o->plan.iters,
           o->plan.check ? "on (timings include pattern work)" : "off");
    printf("# %12s %8s %14s %14s\n", "bytes", "iters", "latency_us", "bw_MB/s");
    fflush(stdout);
}

static void print_row(const struct pp_cursor *c, double elapsed_us)
{
    /* One-way latency is half a round trip; bandwidth counts one direction's bytes. */
    double latency = elapsed_us / (double)c->timed / 2.0;
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
                  pp_exchange_fn exchange, void *state)
{
    struct pp_cursor c;
    double t0 = 0;
    int more;

    print_header(tool, o);
    for (more = pp_cursor_start(&c, &o->plan); more; more = pp_cursor_next(&c, &o->plan)) {
        if (o->plan.check)
            pp_fill(out, c.size, pp_seed(&c));
        if (c.round == c.warmup)
            t0 = pp_now_us();
        if (exchange(state, c.size, out, in) != 0)
            return -1;
        if (o->plan.check && pp_verify(in, c.size, pp_seed(&c)) != 0) {
            fprintf(stderr, "%s: checksum mismatch at %" PRIu64 " bytes, round %" PRIu64 "\n",
                    tool, c.size, c.round);
            return -1;
        }
        if (c.round + 1 == c.warmup + c.timed)
            print_row(&c, pp_now_us() - t0);
    }
    print_footer();
    return 0;
}
