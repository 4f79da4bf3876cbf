/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A program as OrangeFS tools are: linked against libbmi.so, tcp only. It exchanges one message
 * with itself over 127.0.0.1, then checks /proc/self/maps for the optional libraries
 * (doc/architecture.md, "What is loaded when"). Optional steps first ask for a feature whose
 * library the test driver has hidden, and check that only that request fails.
 *   optional_libraries [verbs] [pmix] [encryption]
 * Exit 0: all as expected; 1: a check failed (a line on stderr says which). */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bmi.h"

static const char *const optional_libraries[] = {
    "libibverbs", "librdmacm", "libpmix", "libhwloc",  "libevent",
    "libmunge",   "libudev",   "libnl",   "libcrypto",
};

static int failed(const char *what, int rc)
{
    fprintf(stderr, "optional_libraries: %s: %d (%s)\n", what, rc, bmi_status_string(rc));
    return 1;
}

/* A port free a moment ago; BMI_initialize retries on the rare collision. */
static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts tcp on 127.0.0.1 and sends one unexpected message to itself; 0 when it arrived. */
static int tcp_exchange(void)
{
    static char hello[] = "hello over tcp";
    char address[64];
    struct BMI_unexpected_info info;
    bmi_context_id ctx;
    BMI_addr_t self;
    bmi_op_id_t id;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    void *user = NULL;
    int attempt, rc = -BMI_EADDRINUSE, outcount = 0, got = 0;
    double deadline;

    for (attempt = 0; attempt < 5 && rc == -BMI_EADDRINUSE; ++attempt) {
        snprintf(address, sizeof address, "tcp://127.0.0.1:%d", free_port());
        rc = BMI_initialize("bmi_tcp", address, BMI_INIT_SERVER, NULL);
    }
    if (rc < 0)
        return failed("BMI_initialize(bmi_tcp)", rc);
    if ((rc = BMI_open_context(&ctx)) < 0)
        return failed("BMI_open_context", rc);
    if ((rc = BMI_addr_lookup(&self, address, NULL)) < 0)
        return failed("BMI_addr_lookup", rc);
    rc = BMI_post_sendunexpected(&id, self, hello, sizeof hello, BMI_EXT_ALLOC, 5, NULL, ctx, NULL);
    if (rc < 0)
        return failed("BMI_post_sendunexpected", rc);
    deadline = now_s() + 20;
    while ((rc == 0 || !got) && now_s() < deadline) {
        if (rc == 0 && BMI_test(id, &outcount, &error, &actual, &user, 10, ctx) >= 0 &&
            outcount == 1)
            rc = error < 0 ? error : 1;
        if (rc < 0)
            return failed("the send", rc);
        if (!got && BMI_testunexpected(1, &outcount, &info, 10) >= 0 && outcount == 1) {
            if (info.error_code != 0)
                return failed("the unexpected receive", info.error_code);
            got = info.size == (bmi_size_t)sizeof hello &&
                  memcmp(info.buffer, hello, sizeof hello) == 0;
            BMI_unexpected_free(info.addr, info.buffer);
            if (!got)
                return failed("the message arrived changed", 0);
        }
    }
    if (rc != 1 || !got)
        return failed("no exchange within 20 s", rc);
    BMI_close_context(ctx);
    if ((rc = BMI_finalize()) < 0)
        return failed("BMI_finalize", rc);
    return 0;
}

static int maps_clean(void)
{
    char line[4096];
    int reported[sizeof optional_libraries / sizeof *optional_libraries] = {0};
    size_t i;
    int clean = 1;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        perror("optional_libraries: /proc/self/maps");
        return 0;
    }
    while (fgets(line, sizeof line, maps) != NULL) {
        const char *slash = strrchr(line, '/');
        for (i = 0; slash != NULL && i < sizeof optional_libraries / sizeof *optional_libraries;
             ++i) {
            if (!reported[i] &&
                strncmp(slash + 1, optional_libraries[i], strlen(optional_libraries[i])) == 0) {
                fprintf(stderr, "optional_libraries: a tcp-only process maps %s", slash + 1);
                reported[i] = 1;
                clean = 0;
            }
        }
    }
    fclose(maps);
    return clean;
}

int main(int argc, char **argv)
{
    int i, rc;
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "verbs") == 0) {
            rc = BMI_initialize("bmi_verbs", "verbs://127.0.0.1:0", BMI_INIT_SERVER, NULL);
            printf("verbs: %s\n", bmi_status_string(rc));
            if (rc != -BMI_ENOSYS)
                return failed("BMI_initialize(bmi_verbs) without libibverbs", rc);
        } else if (strcmp(argv[i], "pmix") == 0) {
            /* A launcher in the environment and an allocation to read from it. */
            setenv("PMIX_NAMESPACE", "optional-libraries-test", 1);
            setenv("PMIX_SERVER_URI41", "tcp4://127.0.0.1:1", 1);
            setenv("BMI_ALLOCATION_ID", "bmi.net.tcp0", 1);
            rc = BMI_initialize("bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, NULL);
            printf("pmix: %s\n", bmi_status_string(rc));
            unsetenv("BMI_ALLOCATION_ID");
            if (rc != -BMI_ENOSYS)
                return failed("an allocation from PMIx without libpmix", rc);
        } else if (strcmp(argv[i], "encryption") == 0) {
            /* A key and encryption=require: the record cipher's libcrypto must load. */
            char key[] = "/tmp/bmi-optional-key-XXXXXX";
            int fd = mkstemp(key);
            if (fd < 0 || write(fd,
                                "0123456789abcdef0123456789abcdef"
                                "0123456789abcdef0123456789abcdef\n",
                                65) != 65)
                return failed("writing a key file", fd);
            close(fd);
            setenv("BMI_KEY_FILE", key, 1);
            setenv("BMI_ENCRYPTION", "require", 1);
            rc = BMI_initialize("bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, NULL);
            printf("encryption: %s\n", bmi_status_string(rc));
            unsetenv("BMI_KEY_FILE");
            unsetenv("BMI_ENCRYPTION");
            unlink(key);
            if (rc != -BMI_ENOSYS)
                return failed("encryption=require without libcrypto", rc);
        } else {
            fprintf(stderr, "usage: %s [verbs] [pmix] [encryption]\n", argv[0]);
            return 1;
        }
    }
    if (tcp_exchange() != 0)
        return 1;
    printf("tcp: exchanged one message\n");
    return maps_clean() ? 0 : 1;
}
