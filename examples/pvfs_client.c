/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PVFS-style client: posts the receive for each answer first, then sends the request. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bmi.h"
#include "example_report.h"
#include "pvfs_proto.h"

struct client
{
    bmi_context_id context;
    BMI_addr_t server;
    struct pvfs_request *request; /* BMI_memalloc'ed, reused for every request */
    unsigned char *response;      /* BMI_memalloc'ed, size bytes */
    bmi_size_t size;
    double timeout_s;
    const char *server_name; /* the address as given, for messages */
};

/* One operation that failed in libbmi, with its cause (example_report.h). */
static void report(const struct client *c, const char *doing, int code)
{
    example_report("client", doing, c->server_name, code, EXAMPLE_FROM_LIBRARY);
}

/* One operation that outlived this client's own --timeout-ms. */
static void report_expired(const struct client *c, const char *doing)
{
    example_report("client", doing, c->server_name, -BMI_ETIMEDOUT, (int)(c->timeout_s * 1000.0));
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--methods LIST] [--iterations N] [--size BYTES] [--timeout-ms MS]\n"
            "          [--shutdown] SERVER_ADDR\n",
            argv0);
    return 2;
}

/* Waits for one operation. Returns 0 with *error set, or -1 if it did not finish in time (it is
 * cancelled and collected then, so its buffer is free again), or a BMI_test failure. */
static int wait_for(struct client *c, bmi_op_id_t id, bmi_error_code_t *error, bmi_size_t *actual)
{
    double deadline = pvfs_now_s() + c->timeout_s;
    int outcount = 0, rc, cancelled = 0;
    void *user = NULL;
    for (;;) {
        rc = BMI_test(id, &outcount, error, actual, &user, 100, c->context);
        if (rc < 0) {
            fprintf(stderr, "client: BMI_test: %s\n", bmi_status_string(rc));
            return rc;
        }
        if (outcount == 1)
            return cancelled ? -1 : 0;
        if (pvfs_now_s() < deadline)
            continue;
        if (cancelled) {
            fprintf(stderr, "client: a cancelled operation never completed\n");
            return -1;
        }
        rc = BMI_cancel(id, c->context);
        if (rc < 0)
            fprintf(stderr, "client: BMI_cancel: %s\n", bmi_status_string(rc));
        cancelled = 1;
        deadline = pvfs_now_s() + 2.0;
    }
}

static int verify(const struct client *c, uint64_t request_id, bmi_size_t actual)
{
    struct pvfs_response head;
    size_t bad;
    if (actual < (bmi_size_t)sizeof(head)) {
        fprintf(stderr, "client: response of %" PRId64 " bytes is too short\n", actual);
        return -1;
    }
    memcpy(&head, c->response, sizeof(head));
    if (head.magic != PVFS_PROTO_MAGIC || head.request_id != request_id) {
        fprintf(stderr, "client: response header does not match request %" PRIu64 "\n", request_id);
        return -1;
    }
    if (head.status != 0) {
        fprintf(stderr, "client: server refused request: %s\n", strerror(head.status));
        return -1;
    }
    if (actual != c->size || head.size != (uint64_t)c->size) {
        fprintf(stderr, "client: got %" PRId64 " bytes, wanted %" PRId64 "\n", actual, c->size);
        return -1;
    }
    bad = pvfs_pattern_check(c->response + sizeof(head), (size_t)actual - sizeof(head), request_id);
    if (bad != (size_t)actual - sizeof(head)) {
        fprintf(stderr, "client: payload byte %zu wrong in request %" PRIu64 "\n", bad, request_id);
        return -1;
    }
    return 0;
}

/* One request/response exchange; returns 0 when the verified answer arrived. */
static int exchange(struct client *c, uint32_t op, uint64_t request_id, bmi_msg_tag_t tag)
{
    bmi_op_id_t recv_id, send_id;
    bmi_size_t recv_actual = 0, send_actual = 0;
    bmi_error_code_t recv_error = 0, send_error = 0;
    int recv_rc, send_rc, rc;

    c->request->magic = PVFS_PROTO_MAGIC;
    c->request->op = op;
    c->request->request_id = request_id;
    c->request->response_size = (uint64_t)c->size;
    memset(c->response, 0, (size_t)c->size); /* stale bytes must not pass the check */

    /* The receive goes first, so the answer never waits for a buffer. */
    recv_rc = BMI_post_recv(&recv_id, c->server, c->response, c->size, &recv_actual, BMI_PRE_ALLOC,
                            tag, NULL, c->context, NULL);
    if (recv_rc < 0) {
        report(c, "posting the receive for a response from", recv_rc);
        return -1;
    }
    send_rc = BMI_post_sendunexpected(&send_id, c->server, c->request, sizeof(*c->request),
                                      BMI_PRE_ALLOC, tag, NULL, c->context, NULL);
    if (send_rc < 0) {
        report(c, "sending a request to", send_rc);
        if (recv_rc == 0 && BMI_cancel(recv_id, c->context) == 0)
            wait_for(c, recv_id, &recv_error, &recv_actual);
        return -1;
    }
    if (send_rc == 0) {
        rc = wait_for(c, send_id, &send_error, &send_actual);
        if (rc == 0 && send_error != 0) {
            report(c, "sending a request to", send_error);
            rc = -1;
        } else if (rc == -1) {
            report_expired(c, "sending a request to");
        }
        if (rc != 0) {
            if (recv_rc == 0 && BMI_cancel(recv_id, c->context) == 0)
                wait_for(c, recv_id, &recv_error, &recv_actual);
            return -1;
        }
    }
    if (recv_rc == 0) {
        rc = wait_for(c, recv_id, &recv_error, &recv_actual);
        if (rc == -1)
            report_expired(c, "waiting for the response from");
        if (rc != 0)
            return -1;
        if (recv_error != 0) {
            report(c, "receiving the response from", recv_error);
            return -1;
        }
    }
    return verify(c, request_id, recv_actual);
}

int main(int argc, char **argv)
{
    const char *methods = NULL; /* --methods, or the one the server's address names */
    char method_of_addr[32];
    const char *server_addr = NULL;
    uint64_t iterations = 100, size = 4096, timeout_ms = 10000, done = 0, i;
    int send_shutdown = 0, rc, failed = 0, a;
    struct client c;
    double start, elapsed;
    /* The pid in the high half keeps request ids, and so patterns, distinct across clients. */
    uint64_t id_base = (uint64_t)getpid() << 32;

    memset(&c, 0, sizeof(c));
    for (a = 1; a < argc; a++) {
        const char *arg = argv[a];
        int ok = 1;
        if (strcmp(arg, "--shutdown") == 0) {
            send_shutdown = 1;
            continue;
        }
        if (arg[0] != '-') {
            server_addr = arg;
            continue;
        }
        if (a + 1 >= argc)
            return usage(argv[0]);
        if (strcmp(arg, "--methods") == 0)
            methods = argv[++a];
        else if (strcmp(arg, "--iterations") == 0)
            ok = pvfs_parse_count(argv[++a], &iterations) == 0;
        else if (strcmp(arg, "--size") == 0)
            ok = pvfs_parse_count(argv[++a], &size) == 0;
        else if (strcmp(arg, "--timeout-ms") == 0)
            ok = pvfs_parse_count(argv[++a], &timeout_ms) == 0;
        else
            ok = 0;
        if (!ok)
            return usage(argv[0]);
    }
    if (server_addr == NULL || size < sizeof(struct pvfs_response) || size > PVFS_MAX_RESPONSE ||
        timeout_ms == 0)
        return usage(argv[0]);
    c.size = (bmi_size_t)size;
    c.timeout_s = (double)timeout_ms / 1000.0;
    c.server_name = server_addr;
    if (methods == NULL)
        methods = pvfs_method_for(server_addr, method_of_addr, sizeof(method_of_addr));

    rc = BMI_initialize(methods, NULL, 0, NULL);
    if (rc < 0) {
        char doing[96];
        snprintf(doing, sizeof(doing), "starting method list %s for", methods);
        report(&c, doing, rc);
        return 1;
    }
    rc = BMI_open_context(&c.context);
    if (rc < 0) {
        fprintf(stderr, "client: BMI_open_context: %s\n", bmi_status_string(rc));
        BMI_finalize();
        return 1;
    }
    rc = BMI_addr_lookup(&c.server, server_addr, NULL);
    if (rc < 0) {
        report(&c, "looking up", rc);
        failed = 1;
    } else {
        c.request = BMI_memalloc(c.server, sizeof(*c.request), BMI_SEND);
        c.response = BMI_memalloc(c.server, c.size, BMI_RECV);
        if (c.request == NULL || c.response == NULL) {
            fprintf(stderr, "client: BMI_memalloc failed\n");
            failed = 1;
        }
    }

    start = pvfs_now_s();
    for (i = 0; i < iterations && !failed; i++) {
        if (exchange(&c, PVFS_OP_GETATTR, id_base | i, (bmi_msg_tag_t)(i & 0x7fffffff)) != 0) {
            fprintf(stderr, "client: request %" PRIu64 " failed\n", i);
            failed = 1;
        } else {
            done++;
        }
    }
    elapsed = pvfs_now_s() - start;
    if (send_shutdown && !failed &&
        exchange(&c, PVFS_OP_SHUTDOWN, id_base | i, (bmi_msg_tag_t)(i & 0x7fffffff)) != 0) {
        fprintf(stderr, "client: shutdown request failed\n");
        failed = 1;
    }
    /* Goodbye tells the server we are done (it frees our address when we disconnect, with or
     * without one). The work is done either way: a server that stopped meanwhile is no
     * failure. */
    if (!send_shutdown && !failed &&
        exchange(&c, PVFS_OP_BYE, id_base | i, (bmi_msg_tag_t)(i & 0x7fffffff)) != 0)
        fprintf(stderr, "client: the server did not answer goodbye\n");

    if (c.request != NULL && BMI_memfree(c.server, c.request, sizeof(*c.request), BMI_SEND) < 0)
        fprintf(stderr, "client: BMI_memfree failed\n");
    if (c.response != NULL && BMI_memfree(c.server, c.response, c.size, BMI_RECV) < 0)
        fprintf(stderr, "client: BMI_memfree failed\n");
    BMI_close_context(c.context);
    rc = BMI_finalize();
    if (rc < 0) {
        fprintf(stderr, "client: BMI_finalize: %s\n", bmi_status_string(rc));
        failed = 1;
    }
    printf("%s %" PRIu64 "/%" PRIu64 " requests of %" PRIu64 " bytes, mean round trip %.1f us%s\n",
           failed ? "FAIL" : "OK", done, iterations, size,
           done ? elapsed * 1e6 / (double)done : 0.0,
           send_shutdown && !failed ? ", server shut down" : "");
    return failed ? 1 : 0;
}
