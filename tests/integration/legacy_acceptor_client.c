/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A plain libbmi tcp client for legacy_acceptor_test: it sends one unexpected, one eager and one
 * rendezvous-sized message to the address it is given, waits (with a deadline) for all three to
 * complete and for the acceptor's reply, prints "SENT" and exits 0. Payload byte i of the message
 * with tag t is (i * 7 + t) & 0xff, so the acceptor can check every byte. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmi.h"
#include "legacy_acceptor.h"
#include "tcp_client_start.h"

static int fail(const char *what, int rc)
{
    fprintf(stderr, "legacy_acceptor_client: %s: %s\n", what, bmi_status_string(rc));
    return 1;
}

static void fill(unsigned char *buf, bmi_size_t size, int tag)
{
    bmi_size_t i;
    for (i = 0; i < size; i++)
        buf[i] = (unsigned char)((i * 7 + tag) & 0xff);
}

/* Waits up to 10 s for op; 0 once it completed without error. */
static int wait_for(bmi_op_id_t id, bmi_context_id context, const char *what)
{
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    void *user = NULL;
    int outcount = 0, rc = 0, i;
    for (i = 0; rc == 0 && outcount == 0 && i < 100; i++)
        rc = BMI_test(id, &outcount, &error, &actual, &user, 100, context);
    if (rc < 0)
        return fail(what, rc);
    if (outcount == 0)
        return fail(what, -BMI_ETIMEDOUT);
    return error != 0 ? fail(what, error) : 0;
}

int main(int argc, char **argv)
{
    static const struct
    {
        int tag;
        bmi_size_t size;
        int unexpected;
    } messages[] = {
        {LA_TAG_UNEXPECTED, LA_SIZE_UNEXPECTED, 1},
        {LA_TAG_EAGER, LA_SIZE_EAGER, 0},
        {LA_TAG_LARGE, LA_SIZE_LARGE, 0},
    };
    static unsigned char buffers[3][LA_SIZE_LARGE];
    bmi_op_id_t ids[3];
    int pending[3];
    bmi_context_id context;
    BMI_addr_t server;
    int rc, i, max_size = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s SERVER_ADDR\n", argv[0]);
        return 2;
    }
    if (tcp_client_start("legacy_acceptor_client", argv[1], &context, &server) < 0)
        return 1;

    /* All three are posted before any completes, so they queue behind the handshake. */
    for (i = 0; i < 3; i++) {
        fill(buffers[i], messages[i].size, messages[i].tag);
        if (messages[i].unexpected)
            rc = BMI_post_sendunexpected(&ids[i], server, buffers[i], messages[i].size,
                                         BMI_EXT_ALLOC, messages[i].tag, NULL, context, NULL);
        else
            rc = BMI_post_send(&ids[i], server, buffers[i], messages[i].size, BMI_EXT_ALLOC,
                               messages[i].tag, NULL, context, NULL);
        if (rc < 0)
            return fail("post", rc);
        pending[i] = rc == 0; /* 1: completed inside the post */
    }
    for (i = 0; i < 3; i++)
        if (pending[i] && wait_for(ids[i], context, "send") != 0)
            return 1;
    /* The reply, in OrangeFS framing, tells the client the server does not take its offer. */
    rc = BMI_post_recv(&ids[0], server, buffers[0], LA_SIZE_REPLY, NULL, BMI_EXT_ALLOC,
                       LA_TAG_REPLY, NULL, context, NULL);
    if (rc < 0)
        return fail("post_recv", rc);
    if (rc == 0 && wait_for(ids[0], context, "recv") != 0)
        return 1;
    for (i = 0; i < LA_SIZE_REPLY; i++)
        if (buffers[0][i] != (unsigned char)((i * 7 + LA_TAG_REPLY) & 0xff)) {
            fprintf(stderr, "legacy_acceptor_client: reply byte %d is wrong\n", i);
            return 1;
        }
    /* The server is now known to be legacy: OrangeFS's own limit, not libbmi's. */
    rc = BMI_get_info(server, BMI_CHECK_MAXSIZE, &max_size);
    if (rc != 0)
        return fail("BMI_CHECK_MAXSIZE", rc);
    if (max_size != 16 * 1024 * 1024) {
        fprintf(stderr, "legacy_acceptor_client: BMI_CHECK_MAXSIZE of a legacy peer is %d\n",
                max_size);
        return 1;
    }
    printf("SENT\n");
    fflush(stdout);
    BMI_close_context(context);
    BMI_finalize();
    return 0;
}
