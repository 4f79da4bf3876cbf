/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One server, two clients: a streamer sends it large messages from a BMI_memalloc'd buffer
 * without pause, and a pinger measures 8-byte round trips to the same server meanwhile. A
 * server has one progress loop for all its connections, so what a method does per step of a
 * large message is what the pinger waits for (doc/perf/shm-notes.md, "A step of a large
 * receive copies at most 1 MiB"). The parent is the server, two forked children the clients.
 *
 *   beside_stream [--cpus SERVER,STREAMER,PINGER] [--rounds N] [--size BYTES] [--name NAME]
 *
 * Prints the pinger's round trips (mean, median, 99th and 99.9th percentile, maximum, in us),
 * then the server's receive rate of the streamer's bytes while the pinger ran. */
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

#define TAG_STREAMER 1
#define TAG_PINGER 2
#define TAG_BULK 3
#define TAG_PING 4
#define TAG_PONG 5
#define PING_SIZE 8

/* The server's standing receives: one bulk message from the streamer, one ping. A post that
 * completes at once is answered and posted again here. */
struct standing
{
    BMI_addr_t streamer, pinger;
    bmi_context_id ctx;
    void *bulk;
    bmi_size_t size, actual;
    unsigned char ping[PING_SIZE], pong[PING_SIZE];
    long bulk_messages;
    int stop;
};

/* The server's bulk messages and seconds, from its first wait for them to the pinger's last
 * ping (the pinger's warm-up included). */
static long received;
static double receiving_s;

static int post_bulk(struct standing *s)
{
    bmi_op_id_t id;
    int rc;
    while ((rc = BMI_post_recv(&id, s->streamer, s->bulk, s->size, &s->actual, BMI_PRE_ALLOC,
                               TAG_BULK, &s->bulk, s->ctx, NULL)) == 1)
        s->bulk_messages++;
    return rc;
}

/* Answers the ping just received (ping[0] 1: the last one) and posts the next receive. */
static int answer_ping(struct standing *s)
{
    bmi_op_id_t id;
    int rc;
    do {
        if (s->ping[0] == 1) {
            s->stop = 1;
            return 0;
        }
        if (BMI_post_send(&id, s->pinger, s->pong, PING_SIZE, BMI_EXT_ALLOC, TAG_PONG, NULL, s->ctx,
                          NULL) < 0)
            return -1;
        rc = BMI_post_recv(&id, s->pinger, s->ping, PING_SIZE, &s->actual, BMI_EXT_ALLOC, TAG_PING,
                           s->ping, s->ctx, NULL);
    } while (rc == 1);
    return rc;
}

static int run_server(const char *listen, int ready_fd, bmi_size_t size)
{
    struct standing s;
    struct BMI_unexpected_info info;
    double deadline = pp_now_us() + 10e6;
    bmi_op_id_t id;
    int outcount, rc;
    memset(&s, 0, sizeof(s));
    s.size = size;
    /* One byte for each client: both may look the server up now. */
    if (BMI_initialize("bmi_shm", listen, BMI_INIT_SERVER, NULL) != 0 ||
        BMI_open_context(&s.ctx) != 0 || write(ready_fd, "rr", 2) != 2)
        return -1;
    while ((s.streamer == 0 || s.pinger == 0) && pp_now_us() < deadline) {
        outcount = 0;
        BMI_testunexpected(1, &outcount, &info, 100);
        if (outcount != 1)
            continue;
        if (info.tag == TAG_STREAMER)
            s.streamer = info.addr;
        else
            s.pinger = info.addr;
        BMI_unexpected_free(info.addr, info.buffer);
    }
    if (s.streamer == 0 || s.pinger == 0)
        return -1;
    s.bulk = BMI_memalloc(s.streamer, size, BMI_RECV);
    if (s.bulk == NULL || post_bulk(&s) < 0)
        return -1;
    rc = BMI_post_recv(&id, s.pinger, s.ping, PING_SIZE, &s.actual, BMI_EXT_ALLOC, TAG_PING, s.ping,
                       s.ctx, NULL);
    if (rc < 0 || (rc == 1 && answer_ping(&s) < 0))
        return -1;
    deadline = pp_now_us() + 120e6;
    receiving_s = pp_now_us();
    while (!s.stop && pp_now_us() < deadline) {
        bmi_op_id_t ids[4];
        bmi_error_code_t errors[4];
        bmi_size_t sizes[4];
        void *users[4];
        int i;
        outcount = 0;
        if (BMI_testcontext(4, ids, &outcount, errors, sizes, users, 100, s.ctx) < 0)
            return -1;
        for (i = 0; i < outcount; i++) {
            if (errors[i] != 0) {
                fprintf(stderr, "beside_stream: server: an operation failed (%d)\n",
                        (int)errors[i]);
                return -1;
            }
            if (users[i] == &s.bulk) {
                s.bulk_messages++;
                if (post_bulk(&s) < 0)
                    return -1;
            } else if (users[i] == s.ping && answer_ping(&s) < 0) {
                return -1;
            }
        }
    }
    received = s.bulk_messages;
    receiving_s = (pp_now_us() - receiving_s) / 1e6;
    return s.stop ? 0 : -1;
}

static int hello(const char *listen, int ready_fd, int tag, bmi_context_id *ctx, BMI_addr_t *server)
{
    static int word = 1;
    bmi_op_id_t id = 0;
    char byte;
    int posted;
    if (read(ready_fd, &byte, 1) != 1 || BMI_initialize(NULL, NULL, 0, NULL) != 0 ||
        BMI_open_context(ctx) != 0 || BMI_addr_lookup(server, listen, NULL) != 0)
        return -1;
    posted = BMI_post_sendunexpected(&id, *server, &word, sizeof(word), BMI_EXT_ALLOC, tag, NULL,
                                     *ctx, NULL);
    return bt_finish("beside_stream", posted, id, *ctx, "hello");
}

/* Sends until killed. */
static int run_streamer(const char *listen, int ready_fd, bmi_size_t size)
{
    bmi_context_id ctx;
    BMI_addr_t server;
    void *buffer;
    if (hello(listen, ready_fd, TAG_STREAMER, &ctx, &server) != 0)
        return -1;
    buffer = BMI_memalloc(server, size, BMI_SEND);
    if (buffer == NULL)
        return -1;
    memset(buffer, 0x5a, (size_t)size);
    for (;;) {
        bmi_op_id_t id = 0;
        int posted =
            BMI_post_send(&id, server, buffer, size, BMI_PRE_ALLOC, TAG_BULK, NULL, ctx, NULL);
        if (bt_finish("beside_stream", posted, id, ctx, "bulk send") != 0)
            break;
    }
    BMI_memfree(server, buffer, size, BMI_SEND);
    return -1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int ping(BMI_addr_t server, bmi_context_id ctx, unsigned char last)
{
    unsigned char out[PING_SIZE] = {last}, in[PING_SIZE];
    bmi_op_id_t receive = 0, send = 0;
    bmi_size_t actual = 0;
    int received = last ? 1
                        : BMI_post_recv(&receive, server, in, PING_SIZE, &actual, BMI_EXT_ALLOC,
                                        TAG_PONG, NULL, ctx, NULL);
    int sent =
        BMI_post_send(&send, server, out, PING_SIZE, BMI_EXT_ALLOC, TAG_PING, NULL, ctx, NULL);
    if (received < 0 || bt_finish("beside_stream", sent, send, ctx, "ping") != 0)
        return -1;
    return bt_finish("beside_stream", received, receive, ctx, "pong");
}

static int run_pinger(const char *listen, int ready_fd, int rounds)
{
    bmi_context_id ctx;
    BMI_addr_t server;
    double *us = malloc(sizeof(double) * (size_t)rounds), sum = 0, started;
    int i, rc = -1;
    if (us == NULL || hello(listen, ready_fd, TAG_PINGER, &ctx, &server) != 0)
        goto out;
    /* A fifth of a second of warm-up: the streamer is under way by its end. */
    for (started = pp_now_us(); pp_now_us() < started + 2e5;)
        if (ping(server, ctx, 0) != 0)
            goto out;
    started = pp_now_us();
    for (i = 0; i < rounds; i++) {
        double t0 = pp_now_us();
        if (ping(server, ctx, 0) != 0)
            goto out;
        us[i] = pp_now_us() - t0;
        sum += us[i];
    }
    started = pp_now_us() - started;
    if (ping(server, ctx, 1) != 0)
        goto out;
    qsort(us, (size_t)rounds, sizeof(double), by_value);
    printf("# beside_stream: %d round trips of %d bytes beside a streamer, %.2f s\n", rounds,
           PING_SIZE, started / 1e6);
    printf("%10s %10s %10s %10s %10s\n", "mean_us", "p50_us", "p99_us", "p99.9_us", "max_us");
    printf("%10.2f %10.2f %10.1f %10.1f %10.1f\n", sum / rounds, us[rounds / 2],
           us[(long)rounds * 99 / 100], us[(long)rounds * 999 / 1000], us[rounds - 1]);
    fflush(stdout);
    BMI_close_context(ctx);
    BMI_finalize();
    rc = 0;
out:
    free(us);
    return rc;
}

static pid_t start(int cpu, int (*role)(const char *, int, bmi_size_t, int), const char *listen,
                   int ready_fd, bmi_size_t size, int rounds)
{
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        bt_pin(cpu);
        _exit(role(listen, ready_fd, size, rounds) == 0 ? 0 : 1);
    }
    return child;
}

static int streamer_role(const char *listen, int ready_fd, bmi_size_t size, int rounds)
{
    (void)rounds;
    return run_streamer(listen, ready_fd, size);
}

static int pinger_role(const char *listen, int ready_fd, bmi_size_t size, int rounds)
{
    (void)size;
    return run_pinger(listen, ready_fd, rounds);
}

int main(int argc, char **argv)
{
    int cpus[3] = {-1, -1, -1}, rounds = 20000, i, status = 0, ready[2], rc;
    long long size = 64LL << 20;
    char listen[96];
    pid_t streamer, pinger;
    snprintf(listen, sizeof(listen), "shm://beside-stream-%d", (int)getpid());
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc)
            sscanf(argv[++i], "%d,%d,%d", &cpus[0], &cpus[1], &cpus[2]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            size = atoll(argv[++i]);
        else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
            snprintf(listen, sizeof(listen), "shm://%s", argv[++i]);
        else {
            fprintf(stderr, "usage: beside_stream [--cpus SERVER,STREAMER,PINGER] [--rounds N] "
                            "[--size BYTES] [--name NAME]\n");
            return 2;
        }
    }
    for (i = 0; i < 3; i++) {
        cpu_set_t allowed;
        if (cpus[i] >= CPU_SETSIZE || cpus[i] < -1 ||
            (cpus[i] >= 0 && (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
                              !CPU_ISSET(cpus[i], &allowed)))) {
            fprintf(stderr, "beside_stream: --cpus: CPU %d is not one this process may use\n",
                    cpus[i]);
            return 2;
        }
    }
    if (rounds < 1 || size < 1) {
        fprintf(stderr, "beside_stream: --rounds and --size want positive numbers\n");
        return 2;
    }
    if (pipe(ready) != 0)
        return 1;
    streamer = start(cpus[1], streamer_role, listen, ready[0], (bmi_size_t)size, rounds);
    pinger = start(cpus[2], pinger_role, listen, ready[0], (bmi_size_t)size, rounds);
    if (streamer < 0 || pinger < 0)
        return 1;
    close(ready[0]);
    bt_pin(cpus[0]);
    rc = run_server(listen, ready[1], (bmi_size_t)size) == 0 ? 0 : 1;
    kill(streamer, SIGKILL);
    waitpid(streamer, NULL, 0);
    if (rc != 0)
        kill(pinger, SIGKILL);
    if (waitpid(pinger, &status, 0) != pinger || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    if (rc == 0)
        printf("# the server received %ld messages of %lld bytes in %.2f s: %.1f MB/s\n", received,
               size, receiving_s, (double)received * (double)size / receiving_s / 1e6);
    return rc;
}
