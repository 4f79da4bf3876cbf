/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Ping-pong latency and bandwidth over BMI with expected messages and pre-posted receives. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmi.h"
#include "pingpong_common.h"

#define TAG_HELLO 1
#define TAG_DATA 2

struct link
{
    bmi_context_id context;
    BMI_addr_t peer;
    int timeout_ms;
};

/* Finishes an operation given its post's return code; returns 0 on success. */
static int finish(const struct link *l, int posted, bmi_op_id_t id, bmi_size_t *actual,
                  const char *what)
{
    double deadline = pp_now_us() + (double)l->timeout_ms * 1e3;
    bmi_error_code_t error = 0;
    bmi_size_t size = 0;
    void *user = NULL;
    int outcount = 0, rc;

    if (posted < 0) {
        fprintf(stderr, "pingpong: posting %s: %s\n", what, bmi_status_string(posted));
        return -1;
    }
    if (posted == 1)
        return 0; /* done during the post; a receive's size is already in *actual */
    while (outcount == 0) {
        if (pp_now_us() > deadline) {
            fprintf(stderr, "pingpong: %s did not finish in %d ms\n", what, l->timeout_ms);
            return -1; /* BMI_finalize cancels it; the process exits next */
        }
        rc = BMI_test(id, &outcount, &error, &size, &user, 100, l->context);
        if (rc < 0) {
            fprintf(stderr, "pingpong: BMI_test(%s): %s\n", what, bmi_status_string(rc));
            return -1;
        }
    }
    if (error != 0) {
        fprintf(stderr, "pingpong: %s failed: %s\n", what, bmi_status_string(error));
        return -1;
    }
    if (actual != NULL)
        *actual = size;
    return 0;
}

static int recv_exact(const struct link *l, bmi_op_id_t id, int posted, bmi_size_t *actual,
                      uint64_t want, const char *what)
{
    if (finish(l, posted, id, actual, what) != 0)
        return -1;
    if ((uint64_t)*actual != want) {
        fprintf(stderr, "pingpong: %s: got %" PRId64 " bytes, expected %" PRIu64 "\n", what,
                *actual, want);
        return -1;
    }
    return 0;
}

/* One ping and its pong, the receive posted first (pp_exchange_fn). */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    const struct link *l = state;
    bmi_op_id_t rid = 0, sid = 0;
    bmi_size_t actual = 0;
    int r = BMI_post_recv(&rid, l->peer, in, (bmi_size_t)size, &actual, BMI_PRE_ALLOC, TAG_DATA,
                          NULL, l->context, NULL);
    int s = BMI_post_send(&sid, l->peer, out, (bmi_size_t)size, BMI_PRE_ALLOC, TAG_DATA, NULL,
                          l->context, NULL);
    if (finish(l, s, sid, NULL, "ping") != 0)
        return -1;
    return recv_exact(l, rid, r, &actual, size, "pong");
}

static int run_client(struct link *l, const struct pp_options *o)
{
    struct pp_plan *hello = BMI_memalloc(l->peer, sizeof(*hello), BMI_SEND);
    uint64_t *ready = BMI_memalloc(l->peer, sizeof(*ready), BMI_RECV);
    void *out = BMI_memalloc(l->peer, (bmi_size_t)o->plan.max_size, BMI_SEND);
    void *in = BMI_memalloc(l->peer, (bmi_size_t)o->plan.max_size, BMI_RECV);
    bmi_op_id_t rid = 0, sid = 0;
    bmi_size_t actual = 0;
    int rc = -1, r, s;

    if (hello == NULL || ready == NULL || out == NULL || in == NULL) {
        fprintf(stderr, "pingpong: BMI_memalloc failed\n");
        return -1; /* whatever was allocated goes with BMI_finalize and the process */
    }
    /* The server learns our address and the plan from the unexpected hello, and answers only
     * once its first receive is posted. */
    *hello = o->plan;
    r = BMI_post_recv(&rid, l->peer, ready, sizeof(*ready), &actual, BMI_PRE_ALLOC, TAG_HELLO,
                      NULL, l->context, NULL);
    s = BMI_post_sendunexpected(&sid, l->peer, hello, sizeof(*hello), BMI_PRE_ALLOC, TAG_HELLO,
                                NULL, l->context, NULL);
    if (finish(l, s, sid, NULL, "hello send") == 0 &&
        recv_exact(l, rid, r, &actual, sizeof(*ready), "hello answer") == 0)
        rc = pp_run_client(o, o->methods, out, in, ping, l);
    /* After a failure an operation may still point into these buffers; they stay allocated
     * until BMI_finalize has cancelled it, and the process exits right after. */
    if (rc == 0) {
        BMI_memfree(l->peer, in, (bmi_size_t)o->plan.max_size, BMI_RECV);
        BMI_memfree(l->peer, out, (bmi_size_t)o->plan.max_size, BMI_SEND);
        BMI_memfree(l->peer, ready, sizeof(*ready), BMI_RECV);
        BMI_memfree(l->peer, hello, sizeof(*hello), BMI_SEND);
    }
    return rc;
}

/* Waits for the client's hello; fills the plan and l->peer. */
static int accept_hello(struct link *l, struct pp_plan *plan)
{
    double deadline = pp_now_us() + (double)l->timeout_ms * 1e3;
    struct BMI_unexpected_info info;
    struct pp_cursor probe;
    int outcount = 0, rc, ok;
    while (outcount == 0) {
        if (pp_now_us() > deadline) {
            fprintf(stderr, "pingpong: no client within %d ms\n", l->timeout_ms);
            return -1;
        }
        rc = BMI_testunexpected(1, &outcount, &info, 100);
        if (rc < 0) {
            fprintf(stderr, "pingpong: BMI_testunexpected: %s\n", bmi_status_string(rc));
            return -1;
        }
    }
    ok = info.error_code == 0 && info.size == (bmi_size_t)sizeof(*plan);
    if (ok) {
        memcpy(plan, info.buffer, sizeof(*plan));
        /* Never allocate from an unchecked size: the same limit the client enforces. */
        ok = plan->magic == PP_MAGIC && pp_cursor_start(&probe, plan) &&
             plan->max_size <= PP_MAX_SIZE;
    }
    if (info.buffer != NULL && BMI_unexpected_free(info.addr, info.buffer) < 0)
        fprintf(stderr, "pingpong: BMI_unexpected_free failed\n");
    if (!ok) {
        fprintf(stderr, "pingpong: bad hello from %s\n", BMI_addr_rev_lookup_unexpected(info.addr));
        return -1;
    }
    l->peer = info.addr;
    return 0;
}

/* Echoes every message of the plan. The receive for message k+1 is posted before the echo of
 * message k is sent, so the client's next ping always finds it waiting. */
static int run_server(struct link *l)
{
    struct pp_plan plan;
    struct pp_cursor c, next;
    void *buf[2] = {NULL, NULL};
    uint64_t *ready = NULL, k;
    bmi_op_id_t rid = 0, sid = 0;
    bmi_size_t actual = 0;
    int rc = -1, r, s, more = 1;

    if (accept_hello(l, &plan) != 0)
        return -1;
    buf[0] = BMI_memalloc(l->peer, (bmi_size_t)plan.max_size, BMI_RECV);
    buf[1] = BMI_memalloc(l->peer, (bmi_size_t)plan.max_size, BMI_RECV);
    ready = BMI_memalloc(l->peer, sizeof(*ready), BMI_SEND);
    if (buf[0] == NULL || buf[1] == NULL || ready == NULL) {
        fprintf(stderr, "pingpong: BMI_memalloc failed\n");
        goto out;
    }
    pp_cursor_start(&c, &plan);
    r = BMI_post_recv(&rid, l->peer, buf[0], (bmi_size_t)c.size, &actual, BMI_PRE_ALLOC,
                      TAG_DATA, NULL, l->context, NULL);
    *ready = PP_MAGIC;
    s = BMI_post_send(&sid, l->peer, ready, sizeof(*ready), BMI_PRE_ALLOC, TAG_HELLO, NULL,
                      l->context, NULL);
    if (finish(l, s, sid, NULL, "hello answer") != 0)
        goto out;
    for (k = 0; more; k++, c = next) {
        void *data = buf[k % 2];
        if (recv_exact(l, rid, r, &actual, c.size, "ping") != 0)
            goto out;
        if (plan.check && pp_verify(data, c.size, pp_seed(&c)) != 0) {
            fprintf(stderr, "pingpong: checksum mismatch at %" PRIu64 " bytes, round %" PRIu64
                            "\n", c.size, c.round);
            goto out;
        }
        next = c;
        more = pp_cursor_next(&next, &plan);
        if (more)
            r = BMI_post_recv(&rid, l->peer, buf[(k + 1) % 2], (bmi_size_t)next.size, &actual,
                              BMI_PRE_ALLOC, TAG_DATA, NULL, l->context, NULL);
        s = BMI_post_send(&sid, l->peer, data, (bmi_size_t)c.size, BMI_PRE_ALLOC, TAG_DATA, NULL,
                          l->context, NULL);
        if (finish(l, s, sid, NULL, "pong") != 0)
            goto out;
    }
    fprintf(stderr, "pingpong: server echoed %" PRIu64 " messages\n", k);
    rc = 0;
out:
    if (rc == 0) { /* see run_client */
        BMI_memfree(l->peer, buf[0], (bmi_size_t)plan.max_size, BMI_RECV);
        BMI_memfree(l->peer, buf[1], (bmi_size_t)plan.max_size, BMI_RECV);
        BMI_memfree(l->peer, ready, sizeof(*ready), BMI_SEND);
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct pp_options o;
    struct link l;
    const char *listen = NULL;
    int rc = pp_parse_options(argc, argv, 1, &o);
    if (rc != 0)
        return rc;
    memset(&l, 0, sizeof(l));
    l.timeout_ms = o.timeout_ms;

    rc = BMI_initialize(o.methods, o.server ? o.addr : NULL, o.server ? BMI_INIT_SERVER : 0,
                        NULL);
    if (rc < 0) {
        fprintf(stderr, "pingpong: BMI_initialize(%s): %s\n", o.methods, bmi_status_string(rc));
        return rc == -BMI_ENOPROTOOPT ? PP_EXIT_SKIP : 1;
    }
    rc = BMI_open_context(&l.context);
    if (rc < 0) {
        fprintf(stderr, "pingpong: BMI_open_context: %s\n", bmi_status_string(rc));
        BMI_finalize();
        return 1;
    }
    if (o.server) {
        rc = BMI_get_info(0, BMI_GET_METH_ADDR, (void *)&listen);
        if (rc < 0 || listen == NULL) {
            fprintf(stderr, "pingpong: BMI_get_info(BMI_GET_METH_ADDR): %s\n",
                    bmi_status_string(rc));
            rc = -1;
        } else {
            printf("ADDR %s\n", listen);
            fflush(stdout);
            rc = run_server(&l);
        }
    } else {
        rc = BMI_addr_lookup(&l.peer, o.addr, NULL);
        if (rc < 0) {
            fprintf(stderr, "pingpong: BMI_addr_lookup(%s): %s\n", o.addr, bmi_status_string(rc));
            rc = rc == -BMI_ENOPROTOOPT ? PP_EXIT_SKIP : -1;
        } else {
            rc = run_client(&l, &o);
        }
    }
    BMI_close_context(l.context);
    if (BMI_finalize() < 0 && rc == 0)
        rc = -1;
    return rc == 0 ? 0 : rc == PP_EXIT_SKIP ? PP_EXIT_SKIP : 1;
}
