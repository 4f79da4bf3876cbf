/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Posts a receive for a large message from a peer the test then kills; exits 0 if the receive
 * completes with an error in time.
 *
 * Protocol with the test, one line each on stdout: "ADDR <address>", "HELLO" once the peer's
 * unexpected hello arrived; then it waits for "post" on stdin, posts the receive, prints
 * "POSTED", and finally "RESULT ...". Exit codes: 0 receive failed (the expected outcome),
 * 1 receive succeeded, 2 no completion before the deadline, 3 setup error. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmi.h"
#include "killed_peer.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int wait_for_hello(BMI_addr_t *peer)
{
    struct BMI_unexpected_info info;
    double deadline = now_ms() + 30000;
    int outcount = 0, rc;
    while (outcount == 0 && now_ms() < deadline) {
        rc = BMI_testunexpected(1, &outcount, &info, 100);
        if (rc < 0) {
            fprintf(stderr, "killed_peer_server: BMI_testunexpected: %s\n", bmi_status_string(rc));
            return -1;
        }
    }
    if (outcount == 0 || info.error_code != 0 || info.tag != KP_TAG_HELLO) {
        fprintf(stderr, "killed_peer_server: no valid hello\n");
        return -1;
    }
    *peer = info.addr;
    if (info.buffer != NULL && BMI_unexpected_free(info.addr, info.buffer) < 0)
        fprintf(stderr, "killed_peer_server: BMI_unexpected_free failed\n");
    return 0;
}

/* Returns the exit code described at the top. */
static int receive_until_failure(bmi_context_id context, BMI_addr_t peer, bmi_size_t size,
                                 double deadline_ms)
{
    void *buf = BMI_memalloc(peer, size, BMI_RECV);
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    bmi_op_id_t id;
    void *user = NULL;
    int outcount = 0, rc;
    double start;

    if (buf == NULL) {
        fprintf(stderr, "killed_peer_server: BMI_memalloc failed\n");
        return 3;
    }
    rc = BMI_post_recv(&id, peer, buf, size, &actual, BMI_PRE_ALLOC, KP_TAG_BIG, NULL, context,
                       NULL);
    if (rc != 0) {
        /* The peer is still alive (stopped) here, so neither an error nor a finished receive
         * is a correct answer to the post. */
        printf("RESULT post returned %d (%s)\n", rc, rc < 0 ? bmi_status_string(rc) : "done");
        return rc < 0 ? 3 : 1;
    }
    printf("POSTED\n");
    fflush(stdout);
    start = now_ms();
    while (outcount == 0 && now_ms() - start < deadline_ms) {
        rc = BMI_test(id, &outcount, &error, &actual, &user, 100, context);
        if (rc < 0) {
            printf("RESULT BMI_test failed: %s\n", bmi_status_string(rc));
            return 3;
        }
    }
    if (outcount == 0) {
        printf("RESULT still pending after %.0f ms\n", deadline_ms);
        /* BMI_finalize cancels it; the buffer is left to process exit. */
        return 2;
    }
    printf("RESULT %s error=%d (%s) actual=%" PRId64 " after %.0f ms\n",
           error != 0 ? "failed" : "succeeded", error, bmi_status_string(error), actual,
           now_ms() - start);
    BMI_memfree(peer, buf, size, BMI_RECV);
    return error != 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *listen = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
    bmi_size_t size = argc > 2 ? (bmi_size_t)strtoll(argv[2], NULL, 10) : 64 << 20;
    double deadline_ms = argc > 3 ? strtod(argv[3], NULL) : 20000;
    const char *real = NULL;
    bmi_context_id context;
    BMI_addr_t peer = 0;
    char line[64];
    int rc, code = 3;

    if (size <= 0 || deadline_ms <= 0) {
        fprintf(stderr, "usage: %s [LISTEN_ADDR [SIZE [DEADLINE_MS]]]\n", argv[0]);
        return 3;
    }
    rc = BMI_initialize("bmi_tcp", listen, BMI_INIT_SERVER, NULL);
    if (rc < 0) {
        fprintf(stderr, "killed_peer_server: BMI_initialize: %s\n", bmi_status_string(rc));
        return 3;
    }
    rc = BMI_open_context(&context);
    if (rc < 0) {
        fprintf(stderr, "killed_peer_server: BMI_open_context: %s\n", bmi_status_string(rc));
        BMI_finalize();
        return 3;
    }
    if (BMI_get_info(0, BMI_GET_METH_ADDR, (void *)&real) == 0 && real != NULL) {
        printf("ADDR %s\n", real);
        fflush(stdout);
        if (wait_for_hello(&peer) == 0) {
            printf("HELLO\n");
            fflush(stdout);
            /* The test says "post" once the peer is stuck in its send. */
            if (fgets(line, sizeof(line), stdin) != NULL && strncmp(line, "post", 4) == 0)
                code = receive_until_failure(context, peer, size, deadline_ms);
            else
                fprintf(stderr, "killed_peer_server: no 'post' command\n");
        }
    } else {
        fprintf(stderr, "killed_peer_server: BMI_get_info(BMI_GET_METH_ADDR) failed\n");
    }
    fflush(stdout);
    BMI_close_context(context);
    rc = BMI_finalize();
    if (rc < 0) {
        fprintf(stderr, "killed_peer_server: BMI_finalize: %s\n", bmi_status_string(rc));
        if (code == 0)
            code = 3;
    }
    return code;
}
