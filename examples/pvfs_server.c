/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PVFS-style request server: unexpected requests in, expected responses out, many clients.
 * Like pvfs2-server it runs with BMI_AUTO_REF_COUNT and gives back each request's reference
 * to its client's address when the request is over, so the library frees a client's address
 * once the client has gone and the server can run for weeks. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmi.h"
#include "example_report.h"
#include "pvfs_proto.h"

#define BATCH 16 /* unexpected messages taken per BMI_testunexpected call */

struct pending_send
{
    int in_use;
    bmi_op_id_t id;
    BMI_addr_t addr;
    void *buffer;
    bmi_size_t size;
};

struct server
{
    bmi_context_id context;
    struct pending_send *sends; /* capacity entries; user_ptr of each send points at one */
    int capacity;
    int outstanding;
    uint64_t requests;
    uint64_t answered;
    uint64_t failed;
    uint64_t released;     /* references given back, one per request */
    uint64_t max_requests; /* 0: no limit */
    int stopping;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--methods LIST] [--max-requests N] [--max-outstanding N] [LISTEN_ADDR]\n"
            "  LISTEN_ADDR defaults to tcp://127.0.0.1:0; the real address is printed as\n"
            "  'ADDR <address>' on the first line of stdout.\n",
            argv0);
    return 2;
}

/* With BMI_AUTO_REF_COUNT, BMI_testunexpected takes a reference to the sender's address for
 * each request it hands out; the server gives it back once the request is over. An address
 * nobody references is freed when its client has gone (at once if it has gone already), so
 * the addresses held follow the clients connected, not every client ever served. */
static void release_request(struct server *s, BMI_addr_t addr)
{
    int rc = BMI_set_info(addr, BMI_DEC_ADDR_REF, NULL);
    if (rc == 0)
        s->released++;
    else
        fprintf(stderr, "server: releasing a request's address: %s\n", bmi_status_string(rc));
}

/* A send is over (error 0 or -BMI_E*): counts it, frees its buffer and ends its request. */
static void settle(struct server *s, struct pending_send *p, int error)
{
    int rc;
    if (error != 0) {
        /* A client that went away loses its answer; the others carry on. */
        example_report("server", "answering", BMI_addr_rev_lookup(p->addr), error,
                       EXAMPLE_FROM_LIBRARY);
        s->failed++;
    } else {
        s->answered++;
    }
    rc = BMI_memfree(p->addr, p->buffer, p->size, BMI_SEND);
    if (rc < 0)
        fprintf(stderr, "server: BMI_memfree: %s\n", bmi_status_string(rc));
    release_request(s, p->addr);
    p->in_use = 0;
    s->outstanding--;
}

/* Collects finished sends; returns the BMI_testcontext error, if any. */
static int reap(struct server *s, int idle_ms)
{
    bmi_op_id_t ids[BATCH];
    bmi_error_code_t errors[BATCH];
    bmi_size_t sizes[BATCH];
    void *users[BATCH];
    int outcount = 0, i;
    int rc = BMI_testcontext(BATCH, ids, &outcount, errors, sizes, users, idle_ms, s->context);
    if (rc < 0) {
        fprintf(stderr, "server: BMI_testcontext: %s\n", bmi_status_string(rc));
        return rc;
    }
    for (i = 0; i < outcount; i++)
        settle(s, users[i], errors[i]);
    return 0;
}

/* Checks a request; returns 0 or the errno the response carries. */
static int decode(const struct BMI_unexpected_info *info, struct pvfs_request *req)
{
    if (info->size != (bmi_size_t)sizeof(*req))
        return EPROTO;
    memcpy(req, info->buffer, sizeof(*req)); /* the buffer need not be aligned for the struct */
    if (req->magic != PVFS_PROTO_MAGIC)
        return EPROTO;
    if (req->op != PVFS_OP_GETATTR && req->op != PVFS_OP_SHUTDOWN && req->op != PVFS_OP_BYE)
        return ENOSYS;
    if (req->response_size < sizeof(struct pvfs_response) || req->response_size > PVFS_MAX_RESPONSE)
        return EMSGSIZE;
    return 0;
}

static void answer(struct server *s, const struct BMI_unexpected_info *info)
{
    struct pvfs_request req;
    struct pvfs_response head;
    struct pending_send *p = NULL;
    unsigned char *buf;
    bmi_size_t size;
    int i, rc, status;

    s->requests++;
    if (s->max_requests != 0 && s->requests >= s->max_requests)
        s->stopping = 1;
    if (info->error_code != 0) {
        fprintf(stderr, "server: unexpected message error: %s\n",
                bmi_status_string(info->error_code));
        s->failed++;
        release_request(s, info->addr);
        return;
    }
    memset(&req, 0, sizeof(req));
    status = decode(info, &req);
    size = status != 0 ? (bmi_size_t)sizeof(head) : (bmi_size_t)req.response_size;
    buf = BMI_memalloc(info->addr, size, BMI_SEND);
    if (buf == NULL) {
        fprintf(stderr, "server: BMI_memalloc(%" PRId64 ") failed\n", size);
        s->failed++;
        release_request(s, info->addr);
        return;
    }
    head.magic = PVFS_PROTO_MAGIC;
    head.status = status;
    head.request_id = req.request_id;
    head.size = (uint64_t)size;
    memcpy(buf, &head, sizeof(head));
    pvfs_pattern_fill(buf + sizeof(head), (size_t)size - sizeof(head), req.request_id);

    for (i = 0; i < s->capacity && p == NULL; i++)
        if (!s->sends[i].in_use)
            p = &s->sends[i]; /* the main loop guarantees a free entry */
    p->in_use = 1;
    p->addr = info->addr;
    p->buffer = buf;
    p->size = size;
    s->outstanding++;
    rc =
        BMI_post_send(&p->id, info->addr, buf, size, BMI_PRE_ALLOC, info->tag, p, s->context, NULL);
    if (rc < 0)
        settle(s, p, rc);
    else if (rc == 1)
        settle(s, p, 0); /* completed during the post: there is nothing to test */
    if (status == 0 && req.op == PVFS_OP_SHUTDOWN)
        s->stopping = 1;
}

/* One turn of the service loop; returns a negative BMI code on a fatal error. */
static int serve_once(struct server *s)
{
    struct BMI_unexpected_info infos[BATCH];
    int room = s->capacity - s->outstanding;
    int outcount = 0, i, rc;

    if (room == 0)
        return reap(s, 100); /* full table: wait for a send before taking more work */
    if (room > BATCH)
        room = BATCH;
    /* Sleep in testunexpected only when no send is waiting to be reaped. */
    rc = BMI_testunexpected(room, &outcount, infos, s->outstanding ? 0 : 100);
    if (rc < 0) {
        fprintf(stderr, "server: BMI_testunexpected: %s\n", bmi_status_string(rc));
        return rc;
    }
    for (i = 0; i < outcount; i++) {
        answer(s, &infos[i]);
        if (infos[i].buffer != NULL) {
            rc = BMI_unexpected_free(infos[i].addr, infos[i].buffer);
            if (rc < 0)
                fprintf(stderr, "server: BMI_unexpected_free: %s\n", bmi_status_string(rc));
        }
    }
    /* With sends pending, wait at most 1 ms for them: a new request must not sit behind a
     * slow client's response. */
    if (s->outstanding > 0)
        return reap(s, outcount > 0 ? 0 : 1);
    return 0;
}

/* Lets the answers already posted reach their clients before BMI_finalize drops them. */
static void drain(struct server *s)
{
    double deadline = pvfs_now_s() + 10.0;
    int i;
    while (s->outstanding > 0 && pvfs_now_s() < deadline)
        if (reap(s, 100) < 0)
            break;
    if (s->outstanding == 0)
        return;
    fprintf(stderr, "server: %d sends still pending at exit, cancelling\n", s->outstanding);
    for (i = 0; i < s->capacity; i++)
        if (s->sends[i].in_use && BMI_cancel(s->sends[i].id, s->context) < 0)
            fprintf(stderr, "server: BMI_cancel failed\n");
    deadline = pvfs_now_s() + 2.0;
    while (s->outstanding > 0 && pvfs_now_s() < deadline)
        if (reap(s, 100) < 0)
            break;
}

int main(int argc, char **argv)
{
    const char *methods = NULL; /* --methods, or the one the listen address names */
    char method_of_addr[32];
    const char *listen_addr = "tcp://127.0.0.1:0";
    const char *real_addr = NULL;
    struct server s;
    struct sigaction sa;
    uint64_t capacity = 256;
    int i, rc, fatal = 0, addresses = -1;

    memset(&s, 0, sizeof(s));
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--methods") == 0 && i + 1 < argc) {
            methods = argv[++i];
        } else if (strcmp(argv[i], "--max-requests") == 0 && i + 1 < argc) {
            if (pvfs_parse_count(argv[++i], &s.max_requests) < 0)
                return usage(argv[0]);
        } else if (strcmp(argv[i], "--max-outstanding") == 0 && i + 1 < argc) {
            if (pvfs_parse_count(argv[++i], &capacity) < 0 || capacity == 0 || capacity > 65536)
                return usage(argv[0]);
        } else if (argv[i][0] != '-') {
            listen_addr = argv[i];
        } else {
            return usage(argv[0]);
        }
    }

    if (methods == NULL)
        methods = pvfs_method_for(listen_addr, method_of_addr, sizeof(method_of_addr));

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    s.capacity = (int)capacity;
    s.sends = calloc((size_t)s.capacity, sizeof(*s.sends));
    if (s.sends == NULL) {
        fprintf(stderr, "server: out of memory\n");
        return 1;
    }
    rc = BMI_initialize(methods, listen_addr, BMI_INIT_SERVER | BMI_AUTO_REF_COUNT, NULL);
    if (rc < 0) {
        char doing[96];
        snprintf(doing, sizeof(doing), "listening with method list %s at", methods);
        example_report("server", doing, listen_addr, rc, EXAMPLE_FROM_LIBRARY);
        free(s.sends);
        return 1;
    }
    rc = BMI_open_context(&s.context);
    if (rc < 0) {
        fprintf(stderr, "server: BMI_open_context: %s\n", bmi_status_string(rc));
        BMI_finalize();
        free(s.sends);
        return 1;
    }
    rc = BMI_get_info(0, BMI_GET_METH_ADDR, (void *)&real_addr);
    if (rc < 0 || real_addr == NULL) {
        fprintf(stderr, "server: BMI_get_info(BMI_GET_METH_ADDR): %s\n", bmi_status_string(rc));
        fatal = 1;
    } else {
        /* The harness waits for this line: flush it now, not at exit. */
        printf("ADDR %s\n", real_addr);
        fflush(stdout);
    }

    while (!fatal && !s.stopping && !interrupted)
        if (serve_once(&s) < 0)
            fatal = 1;
    drain(&s);
    /* What the library still holds: the clients connected now, once every request is over. */
    if (BMI_get_info(0, BMI_ADDRESS_COUNT, &addresses) < 0)
        addresses = -1;

    BMI_close_context(s.context);
    rc = BMI_finalize();
    if (rc < 0) {
        fprintf(stderr, "server: BMI_finalize: %s\n", bmi_status_string(rc));
        fatal = 1;
    }
    printf("DONE requests=%" PRIu64 " answered=%" PRIu64 " failed=%" PRIu64 " released=%" PRIu64
           " addresses=%d\n",
           s.requests, s.answered, s.failed, s.released, addresses);
    free(s.sends);
    return fatal ? 1 : 0;
}
