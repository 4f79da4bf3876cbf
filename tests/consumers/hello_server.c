/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A libbmi server in C99, built as an outside project would build it (CMakeLists.txt, or cc
 * with pkg-config): prints "ADDR <address>", then answers COUNT unexpected messages (default
 * 1) with "echo: <message>" under the same tag, and exits. */
#include <bmi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(const char *what, int rc)
{
    fprintf(stderr, "hello_server: %s: %s\n", what, bmi_status_string(rc));
    return 1;
}

/* Waits up to 10 s for one message; 0 when it came. */
static int wait_unexpected(struct BMI_unexpected_info *info)
{
    int outcount = 0, rc, tries;
    for (tries = 0; tries < 100 && outcount == 0; ++tries) {
        rc = BMI_testunexpected(1, &outcount, info, 100);
        if (rc < 0)
            return rc;
    }
    return outcount == 1 ? info->error_code : -BMI_ETIMEDOUT;
}

static int answer(bmi_context_id ctx, const struct BMI_unexpected_info *info)
{
    char reply[300];
    int len = snprintf(reply, sizeof(reply), "echo: %.*s", (int)info->size, (char *)info->buffer);
    bmi_op_id_t id;
    int rc = BMI_post_send(&id, info->addr, reply, len, BMI_EXT_ALLOC, info->tag, NULL, ctx, NULL);
    int outcount = 0, tries;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    void *user_ptr = NULL;
    if (rc != 0) /* 1: sent already; negative: failed */
        return rc < 0 ? rc : 0;
    for (tries = 0; tries < 100 && outcount == 0; ++tries) {
        rc = BMI_test(id, &outcount, &error, &actual, &user_ptr, 100, ctx);
        if (rc < 0)
            return rc;
    }
    return outcount == 1 ? error : -BMI_ETIMEDOUT;
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 1, i, rc;
    char *addr = NULL;
    bmi_context_id ctx;

    rc = BMI_initialize("bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, NULL);
    if (rc < 0)
        return failed("BMI_initialize", rc);
    rc = BMI_open_context(&ctx);
    if (rc < 0)
        return failed("BMI_open_context", rc);
    rc = BMI_get_info(0, BMI_GET_METH_ADDR, &addr);
    if (rc < 0 || addr == NULL)
        return failed("BMI_get_info(BMI_GET_METH_ADDR)", rc);
    printf("ADDR %s\n", addr);
    fflush(stdout);

    for (i = 0; i < count; ++i) {
        struct BMI_unexpected_info info;
        rc = wait_unexpected(&info);
        if (rc < 0)
            return failed("BMI_testunexpected", rc);
        rc = answer(ctx, &info);
        BMI_unexpected_free(info.addr, info.buffer);
        if (rc < 0)
            return failed("BMI_post_send", rc);
    }
    BMI_close_context(ctx);
    rc = BMI_finalize();
    return rc < 0 ? failed("BMI_finalize", rc) : 0;
}
