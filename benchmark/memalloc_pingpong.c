/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A ping-pong as PVFS does it: every request and every reply in a buffer BMI_memalloc'd for
 * it and freed once the message is through, at OrangeFS's metadata sizes (16-64 KiB). The
 * pingpong driver allocates its two buffers once; this one shows what an allocation per
 * message costs a method (shm's shared buffers: doc/perf/shm-notes.md). The parent is the
 * server, a forked child the client; both print nothing but the client's table.
 *
 *   memalloc_pingpong [--cpus A,B] [--rounds N] [--name NAME]
 *
 * Rows: one message size each, then "mixed", every round another size from 18 to 57 KB.
 * Columns: microseconds per round trip (allocations, copies and frees included). */
#define _GNU_SOURCE

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bmi.h"
#include "bmi_tool.h"
#include "pingpong_common.h"

#define TAG_HELLO 1
#define TAG_DATA 2

static const bmi_size_t sizes[] = {16384, 18000, 32768, 57000, 65536, 0 /* mixed */};
#define SIZE_COUNT (sizeof(sizes) / sizeof(sizes[0]))

static bmi_size_t round_size(bmi_size_t row_size, int round)
{
    return row_size != 0 ? row_size : 18000 + (bmi_size_t)round * 7919 % 39000;
}

/* One leg: a fresh buffer, written (send) or read (receive), freed after completion. */
static int leg(BMI_addr_t peer, bmi_context_id ctx, bmi_size_t size, int sending, int round)
{
    bmi_op_id_t id = 0;
    bmi_size_t actual = 0;
    int posted, rc;
    unsigned char *buffer = BMI_memalloc(peer, size, sending ? BMI_SEND : BMI_RECV);
    if (buffer == NULL)
        return -1;
    if (sending) {
        memset(buffer, round & 0xff, (size_t)size); /* PVFS encodes the whole message */
        posted = BMI_post_send(&id, peer, buffer, size, BMI_PRE_ALLOC, TAG_DATA, NULL, ctx, NULL);
    } else {
        posted = BMI_post_recv(&id, peer, buffer, size, &actual, BMI_PRE_ALLOC, TAG_DATA, NULL, ctx,
                               NULL);
    }
    rc = bt_finish("memalloc_pingpong", posted, id, ctx, sending ? "send" : "receive");
    if (rc == 0 && !sending && (buffer[0] != (round & 0xff) || buffer[size - 1] != buffer[0])) {
        fprintf(stderr, "memalloc_pingpong: wrong data in round %d\n", round);
        rc = -1;
    }
    BMI_memfree(peer, buffer, size, sending ? BMI_SEND : BMI_RECV);
    return rc;
}

static int rounds_of(BMI_addr_t peer, bmi_context_id ctx, int client, int rounds, double *us)
{
    size_t row;
    int round;
    for (row = 0; row < SIZE_COUNT; row++) {
        int warmup = rounds / 10 + 10;
        double start = 0;
        for (round = -warmup; round < rounds; round++) {
            bmi_size_t size = round_size(sizes[row], round + warmup);
            if (round == 0)
                start = pp_now_us();
            if (leg(peer, ctx, size, client, round) != 0 ||
                leg(peer, ctx, size, !client, round) != 0)
                return -1;
        }
        if (us != NULL)
            us[row] = (pp_now_us() - start) / rounds;
    }
    return 0;
}

static int run_server(const char *listen, int ready_fd, int rounds)
{
    bmi_context_id ctx;
    struct BMI_unexpected_info info;
    int outcount = 0, rc;
    double deadline;
    if (BMI_initialize("bmi_shm", listen, BMI_INIT_SERVER, NULL) != 0 ||
        BMI_open_context(&ctx) != 0)
        return -1;
    if (write(ready_fd, "r", 1) != 1)
        return -1;
    deadline = pp_now_us() + 10e6;
    while (outcount == 0 && pp_now_us() < deadline)
        BMI_testunexpected(1, &outcount, &info, 100);
    if (outcount != 1)
        return -1;
    BMI_unexpected_free(info.addr, info.buffer);
    rc = rounds_of(info.addr, ctx, 0, rounds, NULL);
    BMI_close_context(ctx);
    BMI_finalize();
    return rc;
}

static int run_client(const char *listen, int ready_fd, int rounds)
{
    bmi_context_id ctx;
    BMI_addr_t server = 0;
    bmi_op_id_t id = 0;
    double us[SIZE_COUNT];
    static int hello = 1;
    char byte;
    size_t row;
    int posted;
    if (read(ready_fd, &byte, 1) != 1 || BMI_initialize(NULL, NULL, 0, NULL) != 0 ||
        BMI_open_context(&ctx) != 0 || BMI_addr_lookup(&server, listen, NULL) != 0)
        return -1;
    posted = BMI_post_sendunexpected(&id, server, &hello, sizeof(hello), BMI_EXT_ALLOC, TAG_HELLO,
                                     NULL, ctx, NULL);
    if (bt_finish("memalloc_pingpong", posted, id, ctx, "hello") != 0 ||
        rounds_of(server, ctx, 1, rounds, us) != 0)
        return -1;
    printf("# memalloc_pingpong: a buffer per message, %d rounds per row\n", rounds);
    printf("%10s %14s\n", "bytes", "us/roundtrip");
    for (row = 0; row < SIZE_COUNT; row++) {
        if (sizes[row] != 0)
            printf("%10lld %14.2f\n", (long long)sizes[row], us[row]);
        else
            printf("%10s %14.2f\n", "mixed", us[row]);
    }
    fflush(stdout);
    BMI_close_context(ctx);
    BMI_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int cpu_server = -1, cpu_client = -1, rounds = 2000, i, status = 0, ready[2];
    char listen[96];
    pid_t child;
    snprintf(listen, sizeof(listen), "shm://memalloc-pp-%d", (int)getpid());
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc)
            sscanf(argv[++i], "%d,%d", &cpu_server, &cpu_client);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
            snprintf(listen, sizeof(listen), "shm://%s", argv[++i]);
        else {
            fprintf(stderr, "usage: memalloc_pingpong [--cpus A,B] [--rounds N] [--name NAME]\n");
            return 2;
        }
    }
    if (rounds < 1 || pipe(ready) != 0)
        return 2;
    child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        bt_pin(cpu_client);
        close(ready[1]);
        _exit(run_client(listen, ready[0], rounds) == 0 ? 0 : 1);
    }
    close(ready[0]);
    bt_pin(cpu_server);
    if (run_server(listen, ready[1], rounds) != 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return 1;
    }
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    return 0;
}
