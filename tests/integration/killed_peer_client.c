/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A BMI peer that starts a large send and then stops making progress until it is killed.
 *
 * BMI makes progress only inside its calls, so after "STALLED" nothing more of the message
 * leaves this process: at most what the kernel's socket buffers took, far less than SIZE.
 * Prints "COMPLETED" instead (and exits 4) if the send finished before it could stall, which
 * leaves the test without a peer dying mid-message. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bmi.h"
#include "killed_peer.h"
#include "tcp_client_start.h"

static int fail(const char *what, int rc)
{
    fprintf(stderr, "killed_peer_client: %s: %s\n", what, bmi_status_string(rc));
    return 1;
}

int main(int argc, char **argv)
{
    static const char hello[] = "hello";
    bmi_size_t size = argc > 2 ? (bmi_size_t)strtoll(argv[2], NULL, 10) : 64 << 20;
    bmi_context_id context;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    bmi_op_id_t id;
    BMI_addr_t server;
    void *big, *user = NULL;
    int rc, outcount = 0, i;

    if (argc < 2 || size <= 0) {
        fprintf(stderr, "usage: %s SERVER_ADDR [SIZE]\n", argv[0]);
        return 2;
    }
    if (tcp_client_start("killed_peer_client", argv[1], &context, &server) < 0)
        return 1;

    rc = BMI_post_sendunexpected(&id, server, hello, sizeof(hello), BMI_EXT_ALLOC, KP_TAG_HELLO,
                                 NULL, context, NULL);
    if (rc < 0)
        return fail("BMI_post_sendunexpected", rc);
    for (i = 0; rc == 0 && outcount == 0 && i < 100; i++)
        if ((rc = BMI_test(id, &outcount, &error, &actual, &user, 100, context)) < 0)
            return fail("BMI_test(hello)", rc);
    if (rc == 0 && outcount == 0)
        return fail("hello", -BMI_ETIMEDOUT);
    if (error != 0)
        return fail("hello", error);

    big = BMI_memalloc(server, size, BMI_SEND);
    if (big == NULL)
        return fail("BMI_memalloc", -BMI_ENOMEM);
    memset(big, 0xa5, (size_t)size);
    rc = BMI_post_send(&id, server, big, size, BMI_PRE_ALLOC, KP_TAG_BIG, NULL, context, NULL);
    if (rc < 0)
        return fail("BMI_post_send", rc);
    outcount = rc; /* 1: finished during the post */
    /* Give the method a moment to push what the socket takes: the server reads none of it
     * before its receive is posted. */
    if (outcount == 0 && (rc = BMI_test(id, &outcount, &error, &actual, &user, 20, context)) < 0)
        return fail("BMI_test(big)", rc);
    if (outcount != 0) {
        printf("COMPLETED error=%d\n", error);
        fflush(stdout);
        return 4;
    }
    printf("STALLED\n");
    fflush(stdout);
    for (;;)
        pause(); /* no more BMI calls: the transfer stays half done until SIGKILL */
}
