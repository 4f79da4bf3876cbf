/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The BMI driver: ping-pong latency, windowed streaming bandwidth and many clients streaming
 * to one server, with expected messages and pre-posted receives. mpi_pingpong.c is its twin. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmi.h"
#include "example_report.h"
#include "pingpong_common.h"

#define TAG_HELLO 1
#define TAG_DATA 2
#define TAG_ACK 3
/* --posted: the idle receives take tags from here up, which the client never sends. */
#define TAG_IDLE_BASE 1000
/* How long one BMI test call may sleep: long, so a waiting peer wakes about once a second
 * (bmi-perf measures an idle server's CPU), short enough to check the --timeout-ms deadline. */
#define WAIT_SLICE_MS 1000

struct link
{
    bmi_context_id context;
    BMI_addr_t peer;
    int timeout_ms;
    bmi_op_id_t *ids; /* PP_MAX_WINDOW send ids of the client's stream */
    uint64_t *ack;    /* the client's ack receive buffer */
};

/* The timeout of a wait for completions. *deadline starts at 0 and is set by the first call,
 * so a wait that succeeds at the first test reads no clock: the MPI and eventfd twins read
 * none per message either, and on some VMs a clock read costs as much as a message. */
static int past_deadline(double *deadline, int timeout_ms)
{
    double now = pp_now_us();
    if (*deadline == 0)
        *deadline = now + (double)timeout_ms * 1e3;
    return now > *deadline;
}

/* A failed operation with the peer it was for, its cause and a hint (example_report.h);
 * timeout_ms is the caller's own deadline if that passed, else EXAMPLE_FROM_LIBRARY. */
static void report_op(const struct link *l, const char *step, const char *what, int code,
                      int timeout_ms)
{
    char doing[128];
    snprintf(doing, sizeof(doing), "%s %s with", step, what);
    example_report("pingpong", doing, BMI_addr_rev_lookup(l->peer), code, timeout_ms);
}

/* Finishes an operation given its post's return code; returns 0 on success. */
static int finish(const struct link *l, int posted, bmi_op_id_t id, bmi_size_t *actual,
                  const char *what)
{
    double deadline = 0; /* read only once a test came back empty: see past_deadline */
    bmi_error_code_t error = 0;
    bmi_size_t size = 0;
    void *user = NULL;
    int outcount = 0, rc;

    if (posted < 0) {
        report_op(l, "posting", what, posted, EXAMPLE_FROM_LIBRARY);
        return -1;
    }
    if (posted == 1)
        return 0; /* done during the post; a receive's size is already in *actual */
    for (;;) {
        rc = BMI_test(id, &outcount, &error, &size, &user, WAIT_SLICE_MS, l->context);
        if (rc < 0) {
            fprintf(stderr, "pingpong: BMI_test(%s): %s\n", what, bmi_status_string(rc));
            return -1;
        }
        if (outcount != 0)
            break;
        if (past_deadline(&deadline, l->timeout_ms)) {
            report_op(l, "waiting for", what, -BMI_ETIMEDOUT, l->timeout_ms);
            return -1; /* BMI_finalize cancels it; the process exits next */
        }
    }
    if (error != 0) {
        report_op(l, "completing", what, error, EXAMPLE_FROM_LIBRARY);
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

#define FINISH_CHUNK 256

/* Finishes n operations together through BMI_testsome, as MPI_Waitall does for the MPI twin:
 * posted[i] is the return code of post i and ids[i] its id. For receives, sizes[i] holds
 * (or receives) each actual size, which must equal want; sizes is NULL for sends. */
static int finish_all(const struct link *l, uint64_t n, const int *posted, bmi_op_id_t *ids,
                      bmi_size_t *sizes, uint64_t want, const char *what)
{
    double deadline = 0;
    bmi_op_id_t chunk[FINISH_CHUNK];
    bmi_error_code_t errors[FINISH_CHUNK];
    bmi_size_t actual[FINISH_CHUNK];
    void *users[FINISH_CHUNK];
    int index[FINISH_CHUNK];
    uint64_t base, i;
    for (base = 0; base < n; base += FINISH_CHUNK) {
        int count = n - base < FINISH_CHUNK ? (int)(n - base) : FINISH_CHUNK, pending = 0, k;
        for (k = 0; k < count; k++) {
            if (posted[base + k] < 0) {
                fprintf(stderr, "pingpong: posting %s: %s\n", what,
                        bmi_status_string(posted[base + k]));
                return -1;
            }
            chunk[k] = posted[base + k] == 1 ? 0 : ids[base + k]; /* 0: a hole, already done */
            pending += chunk[k] != 0;
        }
        while (pending > 0) {
            int outcount = 0, rc;
            rc = BMI_testsome(count, chunk, &outcount, index, errors, actual, users, WAIT_SLICE_MS,
                              l->context);
            if (rc < 0) {
                fprintf(stderr, "pingpong: BMI_testsome(%s): %s\n", what, bmi_status_string(rc));
                return -1;
            }
            for (k = 0; k < outcount; k++) {
                if (errors[k] != 0) {
                    fprintf(stderr, "pingpong: %s failed: %s\n", what,
                            bmi_status_string(errors[k]));
                    return -1;
                }
                chunk[index[k]] = 0;
                if (sizes != NULL)
                    sizes[base + (uint64_t)index[k]] = actual[k];
            }
            pending -= outcount;
            if (outcount == 0 && past_deadline(&deadline, l->timeout_ms)) {
                fprintf(stderr, "pingpong: %s did not finish in %d ms\n", what, l->timeout_ms);
                return -1;
            }
        }
    }
    for (i = 0; sizes != NULL && i < n; i++)
        if ((uint64_t)sizes[i] != want) {
            fprintf(stderr, "pingpong: %s: got %" PRId64 " bytes, expected %" PRIu64 "\n", what,
                    sizes[i], want);
            return -1;
        }
    return 0;
}

/* One ping and its pong (pp_exchange_fn). The receive is posted right after the send, as the
 * MPI twin's MPI_Send then MPI_Recv: the pong needs a whole one-way trip to come back, and a
 * pong that wins the race anyway is kept by the method until the receive matches it. */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    const struct link *l = state;
    bmi_op_id_t rid = 0, sid = 0;
    bmi_size_t actual = 0;
    int s = BMI_post_send(&sid, l->peer, out, (bmi_size_t)size, BMI_PRE_ALLOC, TAG_DATA, NULL,
                          l->context, NULL);
    int r = BMI_post_recv(&rid, l->peer, in, (bmi_size_t)size, &actual, BMI_PRE_ALLOC, TAG_DATA,
                          NULL, l->context, NULL);
    if (finish(l, s, sid, NULL, "ping") != 0)
        return -1;
    return recv_exact(l, rid, r, &actual, size, "pong");
}

/* A window of sends from one buffer, then the server's ack (pp_stream_fn). */
static int stream(void *state, uint64_t size, uint64_t window, void *out)
{
    const struct link *l = state;
    bmi_op_id_t rid = 0;
    bmi_size_t actual = 0;
    int posted[PP_MAX_WINDOW];
    uint64_t i;
    int r = BMI_post_recv(&rid, l->peer, l->ack, sizeof(*l->ack), &actual, BMI_PRE_ALLOC, TAG_ACK,
                          NULL, l->context, NULL);
    for (i = 0; i < window; i++)
        posted[i] = BMI_post_send(&l->ids[i], l->peer, out, (bmi_size_t)size, BMI_PRE_ALLOC,
                                  TAG_DATA, NULL, l->context, NULL);
    if (finish_all(l, window, posted, l->ids, NULL, 0, "stream send") != 0)
        return -1;
    return recv_exact(l, rid, r, &actual, sizeof(*l->ack), "ack");
}

static int run_client(struct link *l, const struct pp_options *o)
{
    static bmi_op_id_t ids[PP_MAX_WINDOW];
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
    /* Written before any round: an untouched buffer reads as the kernel's shared zero page,
     * which a cross-memory copy takes from cache, faster than any buffer a user sends. */
    memset(out, 0xa5, (size_t)o->plan.max_size);
    memset(in, 0, (size_t)o->plan.max_size);
    l->ids = ids;
    l->ack = ready; /* the hello answer is done with it before the first ack */
    /* The server learns our address and the plan from the unexpected hello, and answers only
     * once its first receives are posted (in PP_MANY mode: once every client is in). */
    *hello = o->plan;
    r = BMI_post_recv(&rid, l->peer, ready, sizeof(*ready), &actual, BMI_PRE_ALLOC, TAG_HELLO, NULL,
                      l->context, NULL);
    s = BMI_post_sendunexpected(&sid, l->peer, hello, sizeof(*hello), BMI_PRE_ALLOC, TAG_HELLO,
                                NULL, l->context, NULL);
    if (finish(l, s, sid, NULL, "hello send") == 0 &&
        recv_exact(l, rid, r, &actual, sizeof(*ready), "hello answer") == 0) {
        if (o->pause_ms > 0) {
            struct timespec pause = {o->pause_ms / 1000, (long)(o->pause_ms % 1000) * 1000000L};
            fprintf(stderr, "pingpong: connected, idle for %d ms\n", o->pause_ms);
            nanosleep(&pause, NULL);
        }
        rc = pp_run_client(o, o->methods, out, in, ping, stream, l);
    }
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

/* The server's view of every client and of the receives it has posted. */
struct server
{
    struct link *l;
    struct pp_plan plan;
    uint32_t clients;
    BMI_addr_t peer[PP_MAX_CLIENTS];
    unsigned char *area[PP_MAX_CLIENTS]; /* latency: two messages; streaming: one round */
    uint64_t area_bytes;
    uint64_t *ack;
    bmi_op_id_t *rid, *sid; /* clients x window */
    bmi_size_t *actual;
    int *rposted, *sposted;
    uint64_t k;          /* latency: messages echoed so far, selects the half of area[0] */
    uint64_t idle_count; /* --posted: receives kept posted toward peer[0] that never match */
    bmi_op_id_t *idle_ids;
    void *idle_buffer;
};

/* Waits for one client's hello; the first fixes the plan, later ones must agree with it.
 * patient: wait without a deadline (--forever, between clients). */
static int accept_hello(struct server *sv, uint32_t index, int patient)
{
    double deadline = pp_now_us() + (double)sv->l->timeout_ms * 1e3;
    struct BMI_unexpected_info info;
    struct pp_plan plan;
    struct pp_cursor probe;
    int outcount = 0, rc, ok;
    while (outcount == 0) {
        if (!patient && pp_now_us() > deadline) {
            fprintf(stderr, "pingpong: no client%s within %d ms\n", index > 0 ? " more" : "",
                    sv->l->timeout_ms);
            return -1;
        }
        rc = BMI_testunexpected(1, &outcount, &info, WAIT_SLICE_MS);
        if (rc < 0) {
            fprintf(stderr, "pingpong: BMI_testunexpected: %s\n", bmi_status_string(rc));
            return -1;
        }
    }
    ok = info.error_code == 0 && info.size == (bmi_size_t)sizeof(plan);
    if (ok) {
        memcpy(&plan, info.buffer, sizeof(plan));
        /* Never allocate from an unchecked size: the same limits the client enforces. */
        ok = plan.magic == PP_MAGIC && pp_cursor_start(&probe, &plan) &&
             plan.max_size <= PP_MAX_SIZE && plan.mode <= PP_MANY && plan.window >= 1 &&
             plan.window <= PP_MAX_WINDOW && plan.clients >= 1 && plan.clients <= PP_MAX_CLIENTS &&
             (index == 0 || memcmp(&plan, &sv->plan, sizeof(plan)) == 0);
    }
    if (info.buffer != NULL && BMI_unexpected_free(info.addr, info.buffer) < 0)
        fprintf(stderr, "pingpong: BMI_unexpected_free failed\n");
    if (!ok) {
        fprintf(stderr, "pingpong: bad hello from %s\n", BMI_addr_rev_lookup_unexpected(info.addr));
        return -1;
    }
    if (index == 0) {
        sv->plan = plan;
        sv->clients = plan.mode == PP_MANY ? plan.clients : 1;
    }
    sv->peer[index] = info.addr;
    return 0;
}

static unsigned char *slot(const struct server *sv, uint32_t j, uint64_t i, uint64_t size)
{
    if (sv->plan.mode == PP_LATENCY) /* alternate halves: echo k while k+1 arrives */
        return sv->area[0] + (sv->k % 2) * sv->plan.max_size;
    return sv->area[j] + i * size;
}

/* Posts every receive of round c: one per message of every client. */
static void post_receives(struct server *sv, const struct pp_cursor *c)
{
    uint64_t w = pp_window(&sv->plan, c->size), i;
    uint32_t j;
    for (j = 0; j < sv->clients; j++)
        for (i = 0; i < w; i++) {
            uint64_t n = j * w + i;
            sv->rposted[n] = BMI_post_recv(&sv->rid[n], sv->peer[j], slot(sv, j, i, c->size),
                                           (bmi_size_t)c->size, &sv->actual[n], BMI_PRE_ALLOC,
                                           TAG_DATA, NULL, sv->l->context, NULL);
        }
}

static int server_receive(void *state, const struct pp_cursor *c)
{
    struct server *sv = state;
    uint64_t w = pp_window(&sv->plan, c->size), i;
    uint32_t j;
    /* One message: BMI_test, the call a ping-pong server makes; several: BMI_testsome. */
    if (sv->plan.mode == PP_LATENCY
            ? recv_exact(sv->l, sv->rid[0], sv->rposted[0], &sv->actual[0], c->size, "ping")
            : finish_all(sv->l, (uint64_t)sv->clients * w, sv->rposted, sv->rid, sv->actual,
                         c->size, "receive"))
        return -1;
    for (j = 0; sv->plan.check && j < sv->clients; j++)
        for (i = 0; i < w; i++)
            if (pp_verify(slot(sv, j, i, c->size), c->size, pp_seed(c)) != 0) {
                fprintf(stderr,
                        "pingpong: checksum mismatch at %" PRIu64 " bytes, round %" PRIu64
                        ", client %u\n",
                        c->size, c->round, j);
                return -1;
            }
    return 0;
}

/* Latency: answers first, then posts the next round's receive (into the other half of the
 * area), as the MPI twin's MPI_Send then MPI_Recv; the next ping cannot come before the pong
 * went all the way. Other modes post the next round's receives before answering, so the
 * answer never races them. */
static int server_reply(void *state, const struct pp_cursor *c, const struct pp_cursor *next)
{
    struct server *sv = state;
    uint32_t j;
    if (sv->plan.mode == PP_LATENCY) {
        void *data = slot(sv, 0, 0, c->size);
        int s = BMI_post_send(&sv->sid[0], sv->peer[0], data, (bmi_size_t)c->size, BMI_PRE_ALLOC,
                              TAG_DATA, NULL, sv->l->context, NULL);
        /* A send that is still under way reads this half: the next ping goes to the other.
         * One that left during the call frees it, and reusing it keeps the server to one
         * buffer, as the raw TCP and MPI servers are (on one core, a second one pushed the
         * 64-512 KiB ping-pong out of the cache they share). */
        if (s != 1)
            sv->k++;
        if (next != NULL)
            post_receives(sv, next);
        return finish(sv->l, s, sv->sid[0], NULL, "pong");
    }
    if (next != NULL)
        post_receives(sv, next);
    for (j = 0; j < sv->clients; j++)
        sv->sposted[j] = BMI_post_send(&sv->sid[j], sv->peer[j], sv->ack, sizeof(*sv->ack),
                                       BMI_PRE_ALLOC, TAG_ACK, NULL, sv->l->context, NULL);
    return finish_all(sv->l, sv->clients, sv->sposted, sv->sid, NULL, 0, "ack");
}

/* --posted N: N receives toward the client on distinct tags it never sends, posted before
 * any receive of the plan, so every ping must be matched past them (issue 18: matching must
 * not grow with the receives that wait). */
static int post_idle(struct server *sv, uint64_t count)
{
    uint64_t i;
    if (count == 0)
        return 0;
    sv->idle_ids = calloc(count, sizeof(*sv->idle_ids));
    sv->idle_buffer = BMI_memalloc(sv->peer[0], 1, BMI_RECV);
    if (sv->idle_ids == NULL || sv->idle_buffer == NULL) {
        fprintf(stderr, "pingpong: cannot allocate %" PRIu64 " idle receives\n", count);
        return -1;
    }
    for (i = 0; i < count; i++) {
        bmi_size_t actual = 0;
        int rc = BMI_post_recv(&sv->idle_ids[i], sv->peer[0], sv->idle_buffer, 1, &actual,
                               BMI_PRE_ALLOC, (bmi_msg_tag_t)(TAG_IDLE_BASE + i), NULL,
                               sv->l->context, NULL);
        if (rc != 0) { /* 1 would mean a message matched a tag nobody sends */
            fprintf(stderr, "pingpong: idle receive %" PRIu64 ": %s\n", i,
                    rc < 0 ? bmi_status_string(rc) : "matched");
            return -1;
        }
        sv->idle_count = i + 1;
    }
    return 0;
}

/* Cancels the idle receives and reaps them: each must end cancelled. */
static int cancel_idle(struct server *sv)
{
    double deadline = 0;
    uint64_t i, left = sv->idle_count;
    int rc = 0;
    for (i = 0; i < sv->idle_count; i++)
        BMI_cancel(sv->idle_ids[i], sv->l->context);
    while (left > 0 && rc == 0) {
        bmi_op_id_t ids[FINISH_CHUNK];
        bmi_error_code_t errors[FINISH_CHUNK];
        bmi_size_t actual[FINISH_CHUNK];
        void *users[FINISH_CHUNK];
        int outcount = 0, k;
        rc = BMI_testcontext(FINISH_CHUNK, ids, &outcount, errors, actual, users, WAIT_SLICE_MS,
                             sv->l->context);
        for (k = 0; k < outcount; k++)
            if (errors[k] != -BMI_ECANCEL)
                rc = -1;
        left -= (uint64_t)outcount;
        if (outcount == 0 && past_deadline(&deadline, sv->l->timeout_ms))
            rc = -1;
    }
    if (rc != 0)
        fprintf(stderr, "pingpong: idle receives did not end cancelled\n");
    BMI_memfree(sv->peer[0], sv->idle_buffer, 1, BMI_RECV);
    free(sv->idle_ids);
    return rc == 0 ? 0 : -1;
}

/* Answers the plan of one client (or of plan.clients in PP_MANY mode). */
static int run_server(struct link *l, const char *listen, int patient, uint64_t idle)
{
    static struct server sv;
    struct pp_server_ops ops = {&sv, server_receive, server_reply};
    struct pp_cursor c;
    uint64_t ops_max;
    uint32_t j;
    int rc = -1;

    memset(&sv, 0, sizeof(sv));
    sv.l = l;
    if (accept_hello(&sv, 0, patient) != 0)
        return -1;
    for (j = 1; j < sv.clients; j++)
        if (accept_hello(&sv, j, 0) != 0)
            return -1;
    sv.area_bytes = sv.plan.mode == PP_LATENCY ? 2 * sv.plan.max_size : pp_round_bytes(&sv.plan);
    ops_max = (uint64_t)sv.clients * (sv.plan.mode == PP_LATENCY ? 1 : sv.plan.window);
    sv.rid = calloc(ops_max, sizeof(*sv.rid));
    sv.sid = calloc(ops_max, sizeof(*sv.sid));
    sv.actual = calloc(ops_max, sizeof(*sv.actual));
    sv.rposted = calloc(ops_max, sizeof(*sv.rposted));
    sv.sposted = calloc(ops_max, sizeof(*sv.sposted));
    sv.ack = BMI_memalloc(sv.peer[0], sizeof(*sv.ack), BMI_SEND);
    if (sv.rid == NULL || sv.sid == NULL || sv.actual == NULL || sv.rposted == NULL ||
        sv.sposted == NULL || sv.ack == NULL)
        goto nomem;
    *sv.ack = PP_MAGIC;
    for (j = 0; j < sv.clients; j++) {
        sv.area[j] = BMI_memalloc(sv.peer[j], (bmi_size_t)sv.area_bytes, BMI_RECV);
        if (sv.area[j] == NULL)
            goto nomem;
    }
    if (post_idle(&sv, idle) != 0)
        return -1;
    pp_cursor_start(&c, &sv.plan);
    post_receives(&sv, &c);
    for (j = 0; j < sv.clients; j++)
        sv.sposted[j] = BMI_post_send(&sv.sid[j], sv.peer[j], sv.ack, sizeof(*sv.ack),
                                      BMI_PRE_ALLOC, TAG_HELLO, NULL, l->context, NULL);
    for (j = 0; j < sv.clients; j++)
        if (finish(l, sv.sposted[j], sv.sid[j], NULL, "hello answer") != 0)
            return -1;
    rc = pp_run_server(&sv.plan, "pingpong", listen, &ops);
    if (rc == 0 && sv.idle_count > 0)
        rc = cancel_idle(&sv);
    /* After a failure the buffers stay allocated: see run_client. */
    if (rc == 0) {
        for (j = 0; j < sv.clients; j++)
            BMI_memfree(sv.peer[j], sv.area[j], (bmi_size_t)sv.area_bytes, BMI_RECV);
        BMI_memfree(sv.peer[0], sv.ack, sizeof(*sv.ack), BMI_SEND);
        free(sv.rid);
        free(sv.sid);
        free(sv.actual);
        free(sv.rposted);
        free(sv.sposted);
    }
    return rc;
nomem:
    fprintf(stderr, "pingpong: cannot allocate the server's buffers\n");
    return -1;
}

/* How the server's address reaches its clients: printed for a launcher (standalone) or
 * broadcast over MPI (pingpong_mpi, see pingpong_mpi.h). The server calls it once with its
 * address, or NULL when it could not start; under MPI every client calls it once with NULL
 * before starting BMI and gets the address back (NULL: no server). */
typedef const char *(*pp_share_fn)(const char *addr, int server);

/* Starts BMI in o's role and runs it; the exit status of the process. client_shares: the
 * client learns the address from share too (MPI), rather than from the command line. */
static int run_role(struct pp_options *o, pp_share_fn share, int client_shares)
{
    struct link l;
    const char *listen = NULL;
    const char *methods;
    int rc;
    memset(&l, 0, sizeof(l));
    l.timeout_ms = o->timeout_ms;
    if (!o->server && client_shares && (o->addr = share(NULL, 0)) == NULL) {
        fprintf(stderr, "pingpong: the server did not start\n");
        return 1;
    }
    /* A client with no --method-list names none: every BMI loads what its lookups need, and
     * OrangeFS's BMI refuses a method list without a listen address. */
    methods = !o->server && o->methods == o->address_method ? NULL : o->methods;
    rc = BMI_initialize(methods, o->server ? o->addr : NULL, o->server ? BMI_INIT_SERVER : 0, NULL);
    if (rc < 0) {
        char doing[96];
        snprintf(doing, sizeof(doing), "starting %s for", methods ? methods : "any method");
        example_report("pingpong", doing, o->addr, rc, EXAMPLE_FROM_LIBRARY);
        if (o->server)
            share(NULL, 1);
        return rc == -BMI_ENOPROTOOPT ? PP_EXIT_SKIP : 1;
    }
    rc = BMI_open_context(&l.context);
    if (rc < 0) {
        fprintf(stderr, "pingpong: BMI_open_context: %s\n", bmi_status_string(rc));
        if (o->server)
            share(NULL, 1);
        BMI_finalize();
        return 1;
    }
    if (o->server) {
        rc = BMI_get_info(0, BMI_GET_METH_ADDR, (void *)&listen);
        /* Asking for the listen address is libbmi's; OrangeFS's BMI_GET_METH_ADDR means
         * something else and fails for address 0. The address given then is the one, which
         * works when it names its port. */
        const size_t n = strlen(o->addr);
        if ((rc < 0 || listen == NULL) && !(n >= 2 && strcmp(o->addr + n - 2, ":0") == 0)) {
            listen = o->addr;
            rc = 0;
        }
        if (rc < 0 || listen == NULL) {
            fprintf(stderr, "pingpong: BMI_get_info(BMI_GET_METH_ADDR): %s\n",
                    bmi_status_string(rc));
            share(NULL, 1);
            rc = -1;
        } else {
            share(listen, 1);
            /* --forever: one plan after another until a plan fails or we are killed. */
            do
                rc = run_server(&l, listen, o->forever, o->posted);
            while (rc == 0 && o->forever);
        }
    } else {
        rc = BMI_addr_lookup(&l.peer, o->addr, NULL);
        if (rc < 0) {
            example_report("pingpong", "looking up", o->addr, rc, EXAMPLE_FROM_LIBRARY);
            rc = rc == -BMI_ENOPROTOOPT ? PP_EXIT_SKIP : -1;
        } else {
            rc = run_client(&l, o);
        }
    }
    BMI_close_context(l.context);
    if (BMI_finalize() < 0 && rc == 0)
        rc = -1;
    return rc == 0 ? 0 : rc == PP_EXIT_SKIP ? PP_EXIT_SKIP : 1;
}

#ifdef PP_WITH_MPI
#include "pingpong_mpi.h"
#else
static const char *print_address(const char *addr, int server)
{
    if (server && addr != NULL) {
        printf("ADDR %s\n", addr);
        fflush(stdout);
    }
    return addr;
}

int main(int argc, char **argv)
{
    struct pp_options o;
    int rc = pp_parse_options(argc, argv, PP_OPT_METHODS | PP_OPT_STREAMS, &o);
    if (rc != 0)
        return rc;
    return run_role(&o, print_address, 0);
}
#endif
