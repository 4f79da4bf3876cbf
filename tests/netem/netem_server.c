/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The server of the netem tests: takes checked REQUESTs (netem_wire.h) from any number of
 * clients, receives the BULK each announces, checks it, and sends the REPLY it asks for.
 * Prints "ADDR <address>" when it listens, a line for every failed operation and every bad
 * message, and on SIGTERM a summary; exits 1 if any message was bad. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmi.h"
#include "netem_wire.h"

#define MAX_CLIENTS 256

struct client_state
{
    uint64_t id;
    uint64_t last_seq;
    uint64_t count;
};

/* One request between its arrival and its REPLY's completion. */
struct job
{
    BMI_addr_t addr;
    struct netem_head req;
    unsigned char *buf;      /* the BULK, then the REPLY */
    uint64_t count;          /* the client's count, this request included */
    int replying;            /* 0: the BULK is being received; 1: the REPLY is being sent */
    struct job *prev, *next; /* in jobs: what is still pending is freed at the end */
};

static struct job jobs = {.prev = &jobs, .next = &jobs};
static struct client_state clients[MAX_CLIENTS];
static int client_count;
static uint64_t requests, bulks, replies, bytes, op_failures, bad_messages;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void bad(const struct netem_head *h, const char *what)
{
    bad_messages++;
    printf("BAD client=%" PRIu64 " seq=%" PRIu64 " what=%s t=%.3f\n", h->client, h->seq, what,
           netem_now());
}

/* The client's state, or a new one. A restarted server meets clients in the middle of their
 * sequence, so a client's first request may have any number. */
static struct client_state *client_of(uint64_t id)
{
    int i;
    for (i = 0; i < client_count; i++)
        if (clients[i].id == id)
            return &clients[i];
    if (client_count == MAX_CLIENTS)
        return NULL;
    clients[client_count].id = id;
    clients[client_count].count = 0;
    return &clients[client_count++];
}

static void finish_job(struct job *j)
{
    j->prev->next = j->next;
    j->next->prev = j->prev;
    free(j->buf);
    free(j);
}

static void post_reply(struct job *j, bmi_context_id ctx)
{
    struct netem_head h = {NETEM_MAGIC, NETEM_REPLY, j->req.client, j->req.seq, j->req.reply_size,
                           0,           0,           j->count,      0};
    bmi_op_id_t id;
    int rc;
    free(j->buf);
    j->buf = malloc((size_t)h.size);
    if (j->buf == NULL) {
        fprintf(stderr, "netem_server: out of memory\n");
        exit(2);
    }
    netem_seal(j->buf, &h, h.client * 1000003u + h.seq * 7u + NETEM_REPLY);
    j->replying = 1;
    rc = BMI_post_send(&id, j->addr, j->buf, (bmi_size_t)h.size, BMI_EXT_ALLOC, netem_tag(h.seq), j,
                       ctx, NULL);
    if (rc < 0) {
        op_failures++;
        printf("OPFAIL client=%" PRIu64 " seq=%" PRIu64 " op=reply error=%s t=%.3f\n", h.client,
               h.seq, bmi_status_string(rc), netem_now());
        finish_job(j);
    } else if (rc == 1) {
        replies++;
        bytes += h.size;
        finish_job(j);
    }
}

static void complete(struct job *j, bmi_error_code_t error, bmi_size_t actual, bmi_context_id ctx);

static void post_bulk_recv(struct job *j, bmi_context_id ctx)
{
    bmi_op_id_t id;
    bmi_size_t actual = 0;
    int rc;
    j->buf = malloc((size_t)j->req.bulk_size);
    if (j->buf == NULL) {
        fprintf(stderr, "netem_server: out of memory\n");
        exit(2);
    }
    rc = BMI_post_recv(&id, j->addr, j->buf, (bmi_size_t)j->req.bulk_size, &actual, BMI_EXT_ALLOC,
                       netem_tag(j->req.seq), j, ctx, NULL);
    if (rc < 0) {
        op_failures++;
        printf("OPFAIL client=%" PRIu64 " seq=%" PRIu64 " op=bulk error=%s t=%.3f\n", j->req.client,
               j->req.seq, bmi_status_string(rc), netem_now());
        finish_job(j);
    } else if (rc == 1) {
        complete(j, 0, actual, ctx); /* the BULK had arrived before its receive */
    }
}

static void take_request(const struct BMI_unexpected_info *info, bmi_context_id ctx)
{
    struct netem_head h;
    struct client_state *c;
    struct job *j;
    const char *wrong;
    if (info->error_code != 0) {
        op_failures++;
        printf("OPFAIL op=unexpected error=%s t=%.3f\n", bmi_status_string(info->error_code),
               netem_now());
        return;
    }
    wrong = netem_check(info->buffer, info->size, NETEM_REQUEST, &h);
    if (wrong != NULL) {
        bad(&h, wrong);
        return;
    }
    requests++;
    bytes += h.size;
    c = client_of(h.client);
    if (c == NULL) {
        bad(&h, "too many clients");
        return;
    }
    if (c->count > 0 && h.seq <= c->last_seq) {
        bad(&h, "a request number seen before (duplicate or reordered)");
        return;
    }
    c->last_seq = h.seq;
    c->count++;
    j = calloc(1, sizeof *j);
    if (j == NULL) {
        fprintf(stderr, "netem_server: out of memory\n");
        exit(2);
    }
    j->next = &jobs;
    j->prev = jobs.prev;
    jobs.prev->next = j;
    jobs.prev = j;
    j->addr = info->addr;
    j->req = h;
    j->count = c->count;
    if (h.bulk_size > 0)
        post_bulk_recv(j, ctx);
    else
        post_reply(j, ctx);
}

static void complete(struct job *j, bmi_error_code_t error, bmi_size_t actual, bmi_context_id ctx)
{
    struct netem_head h;
    const char *wrong;
    if (error != 0) {
        op_failures++;
        printf("OPFAIL client=%" PRIu64 " seq=%" PRIu64 " op=%s error=%s t=%.3f\n", j->req.client,
               j->req.seq, j->replying ? "reply" : "bulk", bmi_status_string(error), netem_now());
        finish_job(j);
        return;
    }
    if (j->replying) {
        replies++;
        bytes += j->req.reply_size;
        finish_job(j);
        return;
    }
    wrong = netem_check(j->buf, actual, NETEM_BULK, &h);
    if (wrong == NULL && (h.client != j->req.client || h.seq != j->req.seq))
        wrong = "a BULK of another request";
    if (wrong == NULL && h.size != j->req.bulk_size)
        wrong = "a BULK of another size than announced";
    if (wrong != NULL) {
        bad(&j->req, wrong);
        finish_job(j);
        return;
    }
    bulks++;
    bytes += h.size;
    post_reply(j, ctx);
}

int main(int argc, char **argv)
{
    const char *listen = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
    bmi_context_id ctx;
    struct sigaction sa;
    int rc;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* No method list: the listen address picks the method (tcp://, ofi+tcp://). */
    rc = BMI_initialize(NULL, listen, BMI_INIT_SERVER, NULL);
    if (rc < 0 || (rc = BMI_open_context(&ctx)) < 0) {
        fprintf(stderr, "netem_server: cannot listen at %s: %s\n", listen, bmi_status_string(rc));
        return 2;
    }
    printf("ADDR %s\n", listen);
    while (!stop) {
        struct BMI_unexpected_info info;
        bmi_op_id_t ids[16];
        bmi_error_code_t errors[16];
        bmi_size_t sizes[16];
        void *users[16];
        int out = 0, i;
        if (BMI_testunexpected(1, &out, &info, 0) >= 0 && out == 1) {
            take_request(&info, ctx);
            BMI_unexpected_free(info.addr, info.buffer);
        }
        out = 0;
        rc = BMI_testcontext(16, ids, &out, errors, sizes, users, 10, ctx);
        if (rc < 0) {
            fprintf(stderr, "netem_server: BMI_testcontext: %s\n", bmi_status_string(rc));
            return 2;
        }
        for (i = 0; i < out; i++)
            complete(users[i], errors[i], sizes[i], ctx);
    }
    printf("SERVER requests=%" PRIu64 " bulks=%" PRIu64 " replies=%" PRIu64 " bytes=%" PRIu64
           " opfail=%" PRIu64 " bad=%" PRIu64 " clients=%d\n",
           requests, bulks, replies, bytes, op_failures, bad_messages, client_count);
    BMI_close_context(ctx);
    BMI_finalize();
    while (jobs.next != &jobs)
        finish_job(jobs.next);
    return bad_messages == 0 ? 0 : 1;
}
