/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The client of the netem tests: one request at a time to netem_server, each a checked
 * REQUEST (netem_wire.h), a BULK for some and a REPLY of a size it asks for, small (eager) and
 * large (rendezvous) in turn. Every REPLY is checked: checksum, request, size, and (without
 * --tolerate-errors) that the server took exactly one request per request sent.
 * Prints "OK", "ERR" (a failed operation), "BAD" (a wrong message) and "HUNG" (an operation
 * that neither completed nor failed within --op-timeout-ms) lines, then a CLIENT summary.
 * Exit status: 0; 1 for any BAD or HUNG, or without --tolerate-errors any ERR; 2 usage. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmi.h"
#include "netem_wire.h"

struct options
{
    uint64_t id;
    uint64_t count; /* requests to send; 0: until SIGTERM */
    uint64_t max_large;
    double op_timeout_s;
    double pause_s; /* after a failed request */
    int tolerate;
    int then_idle; /* after --count requests, hold the connection until SIGTERM */
    const char *server;
};

struct stats
{
    uint64_t ok, failed, bad, hung, bytes, ok_since_error;
    double max_latency;
};

static volatile sig_atomic_t stop;
static bmi_context_id ctx;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A size of the kind'th class: 0 none, 1 small (eager), 2 large (rendezvous). */
static uint64_t pick(uint64_t *x, int kind, uint64_t max_large)
{
    if (kind == 0)
        return 0;
    if (kind == 1)
        return sizeof(struct netem_head) + rng(x) % 8192;
    return 96 * 1024 + rng(x) % (max_large - 96 * 1024 + 1);
}

/* Waits for the n posted operations ids[] (user pointer = index); errors[] gets each outcome.
 * Returns 0 when every one completed, -1 if one did not within the timeout (then the rest are
 * cancelled and collected). On the first failure the others are cancelled: their buffers must
 * be free before the next request. */
static int wait_all(bmi_op_id_t *ids, int *done, bmi_error_code_t *errors, bmi_size_t *actual,
                    int n, double timeout_s)
{
    double deadline = netem_now() + timeout_s;
    int left = 0, i, cancelled = 0, hung = 0;
    for (i = 0; i < n; i++)
        left += !done[i];
    while (left > 0) {
        bmi_op_id_t out_ids[4];
        bmi_error_code_t out_errors[4];
        bmi_size_t out_sizes[4];
        void *users[4];
        int out = 0, k;
        if (BMI_testcontext(4, out_ids, &out, out_errors, out_sizes, users, 50, ctx) < 0)
            return -1;
        for (k = 0; k < out; k++) {
            i = (int)(intptr_t)users[k];
            done[i] = 1;
            errors[i] = out_errors[k];
            actual[i] = out_sizes[k];
            left--;
            if (out_errors[k] != 0 && !cancelled) {
                for (int m = 0; m < n; m++)
                    if (!done[m])
                        BMI_cancel(ids[m], ctx);
                cancelled = 1;
            }
        }
        if (left > 0 && netem_now() > deadline) {
            if (hung)
                return -1; /* even cancelling did not end them */
            hung = 1;
            for (i = 0; i < n; i++)
                if (!done[i])
                    BMI_cancel(ids[i], ctx);
            cancelled = 1;
            deadline = netem_now() + 5.0;
        }
    }
    return hung ? -1 : 0;
}

/* One request; 0 ok, 1 an operation failed, 2 a message was wrong, 3 an operation hung. */
static int exchange(const struct options *o, BMI_addr_t server, uint64_t seq, uint64_t *x,
                    unsigned char *req, unsigned char *bulk, unsigned char *reply, struct stats *st)
{
    static const char *names[3] = {"reply", "request", "bulk"};
    const int pattern = (int)(seq % 4); /* bulk: none, small, large; reply: small, large */
    struct netem_head rq = {NETEM_MAGIC, NETEM_REQUEST, o->id, seq, 0, 0, 0, 0, 0};
    struct netem_head bk, rp;
    bmi_op_id_t ids[3];
    int done[3] = {0, 0, 0}, n = 0, rc, i;
    bmi_error_code_t errors[3] = {0, 0, 0};
    bmi_size_t actual[3] = {0, 0, 0};
    double start = netem_now();
    const char *wrong;

    rq.bulk_size = pick(x, pattern == 1 ? 1 : pattern == 3 ? 2 : 0, o->max_large);
    rq.reply_size = pick(x, pattern == 2 ? 2 : 1, o->max_large);
    rq.size = sizeof rq + rng(x) % (NETEM_REQUEST_MAX - sizeof rq);
    netem_seal(req, &rq, rng(x));
    rc = BMI_post_recv(&ids[n], server, reply, (bmi_size_t)o->max_large, &actual[0], BMI_EXT_ALLOC,
                       netem_tag(seq), (void *)(intptr_t)0, ctx, NULL);
    done[n++] = rc != 0;
    errors[0] = rc < 0 ? rc : 0;
    if (rc >= 0) {
        rc = BMI_post_sendunexpected(&ids[n], server, req, (bmi_size_t)rq.size, BMI_EXT_ALLOC,
                                     NETEM_TAG_REQUEST, (void *)(intptr_t)1, ctx, NULL);
        done[n++] = rc != 0;
        errors[1] = rc < 0 ? rc : 0;
    }
    if (rc >= 0 && rq.bulk_size > 0) {
        bk = rq;
        bk.kind = NETEM_BULK;
        bk.size = rq.bulk_size;
        netem_seal(bulk, &bk, rng(x));
        rc = BMI_post_send(&ids[n], server, bulk, (bmi_size_t)bk.size, BMI_EXT_ALLOC,
                           netem_tag(seq), (void *)(intptr_t)2, ctx, NULL);
        done[n++] = rc != 0;
        errors[2] = rc < 0 ? rc : 0;
    }
    if (rc < 0)
        for (i = 0; i < n; i++)
            if (!done[i])
                BMI_cancel(ids[i], ctx);
    if (wait_all(ids, done, errors, actual, n, o->op_timeout_s) < 0) {
        printf("HUNG seq=%" PRIu64 " after=%.3f\n", seq, netem_now() - start);
        return 3;
    }
    for (i = 0; i < n; i++) {
        if (errors[i] != 0 && errors[i] != -BMI_ECANCEL) {
            printf("ERR seq=%" PRIu64 " op=%s error=%s t=%.3f waited=%.3f\n", seq, names[i],
                   bmi_status_string(errors[i]), netem_now(), netem_now() - start);
            return 1;
        }
    }
    wrong = netem_check(reply, actual[0], NETEM_REPLY, &rp);
    if (wrong == NULL && (rp.client != o->id || rp.seq != seq))
        wrong = "a REPLY of another request";
    if (wrong == NULL && rp.size != rq.reply_size)
        wrong = "a REPLY of another size than asked";
    if (wrong == NULL && !o->tolerate && rp.count != seq + 1)
        wrong = "the server took another number of requests than were sent";
    if (wrong != NULL) {
        printf("BAD seq=%" PRIu64 " what=%s\n", seq, wrong);
        return 2;
    }
    st->bytes += rq.size + rq.bulk_size + rp.size;
    if (netem_now() - start > st->max_latency)
        st->max_latency = netem_now() - start;
    printf("OK seq=%" PRIu64 " t=%.3f latency=%.3f\n", seq, netem_now(), netem_now() - start);
    return 0;
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --id N [--count N] [--max-large BYTES] [--op-timeout-ms MS]\n"
            "          [--pause-ms MS] [--tolerate-errors] [--then-idle] SERVER_ADDR\n"
            "Without --count, runs until SIGTERM; with --then-idle, waits for it after the\n"
            "last request with its connection open and nothing posted.\n",
            argv0);
    return 2;
}

static int parse(int argc, char **argv, struct options *o)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--tolerate-errors") == 0) {
            o->tolerate = 1;
            continue;
        }
        if (strcmp(a, "--then-idle") == 0) {
            o->then_idle = 1;
            continue;
        }
        if (a[0] != '-') {
            o->server = a;
            continue;
        }
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--id") == 0)
            o->id = strtoull(v, NULL, 10);
        else if (strcmp(a, "--count") == 0)
            o->count = strtoull(v, NULL, 10);
        else if (strcmp(a, "--max-large") == 0)
            o->max_large = strtoull(v, NULL, 10);
        else if (strcmp(a, "--op-timeout-ms") == 0)
            o->op_timeout_s = strtod(v, NULL) / 1000.0;
        else if (strcmp(a, "--pause-ms") == 0)
            o->pause_s = strtod(v, NULL) / 1000.0;
        else
            return -1;
    }
    return o->server != NULL && o->max_large >= 96 * 1024 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct options o = {0, 0, 512 * 1024, 60.0, 0.2, 0, 0, NULL};
    struct stats st = {0, 0, 0, 0, 0, 0, 0.0};
    struct sigaction sa;
    BMI_addr_t server;
    unsigned char *req, *bulk, *reply;
    uint64_t seq, x;
    int rc;
    if (parse(argc, argv, &o) < 0)
        return usage(argv[0]);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    x = 0x9e3779b97f4a7c15ull ^ (o.id * 0x2545f4914f6cdd1dull);
    req = malloc(NETEM_REQUEST_MAX);
    bulk = malloc((size_t)o.max_large);
    reply = malloc((size_t)o.max_large);
    if (req == NULL || bulk == NULL || reply == NULL)
        return 2;
    /* No method list: the server's address picks the method (tcp://, ofi+tcp://). */
    if ((rc = BMI_initialize(NULL, NULL, 0, NULL)) < 0 || (rc = BMI_open_context(&ctx)) < 0 ||
        (rc = BMI_addr_lookup(&server, o.server, NULL)) < 0) {
        fprintf(stderr, "netem_client: cannot start toward %s: %s\n", o.server,
                bmi_status_string(rc));
        return 2;
    }
    for (seq = 0; !stop && (o.count == 0 || seq < o.count); seq++) {
        rc = exchange(&o, server, seq, &x, req, bulk, reply, &st);
        if (rc == 0) {
            st.ok++;
            st.ok_since_error++;
            continue;
        }
        st.failed += rc == 1;
        st.bad += rc == 2;
        st.hung += rc == 3;
        st.ok_since_error = 0;
        if (rc != 1 || !o.tolerate)
            break;
        /* A server that is gone refuses at once: do not spin on it. */
        struct timespec pause = {(time_t)o.pause_s,
                                 (long)((o.pause_s - (double)(time_t)o.pause_s) * 1e9)};
        nanosleep(&pause, NULL);
    }
    if (o.then_idle) {
        printf("IDLE t=%.3f\n", netem_now());
        while (!stop) {
            struct timespec tick = {0, 100 * 1000 * 1000};
            nanosleep(&tick, NULL);
        }
    }
    printf("CLIENT id=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64 " bad=%" PRIu64 " hung=%" PRIu64
           " bytes=%" PRIu64 " ok_since_error=%" PRIu64 " max_latency=%.3f\n",
           o.id, st.ok, st.failed, st.bad, st.hung, st.bytes, st.ok_since_error, st.max_latency);
    BMI_close_context(ctx);
    BMI_finalize();
    free(req);
    free(bulk);
    free(reply);
    if (st.bad > 0 || st.hung > 0)
        return 1;
    return st.failed > 0 && !o.tolerate ? 1 : 0;
}
