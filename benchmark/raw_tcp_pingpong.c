/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The baseline for pingpong.c: the same plan and table over plain blocking TCP sockets.
 * Latency mode echoes each message; bandwidth mode is the raw stream a message library must
 * match: one write() per message, the receiver reading whatever has arrived (a window at a
 * time), then an 8-byte ack. Many mode has no raw twin (one client per server here).
 * --poll (both ends) reads with MSG_DONTWAIT in a loop instead of sleeping in read(): the
 * fastest a TCP ping-pong gets on two free cores, the reference of bmi_tcp's spin (issue 18).
 * --framed (both ends) puts a 32-byte header before every message, as bmi_tcp's v2 frames do,
 * written in one writev() with the payload and read apart before it (bmi_tcp reads a large
 * frame's header alone so that its payload goes straight into the posted buffer): it shows how
 * much of a gap to plain TCP the framing alone costs (doc/perf/placement.md). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pingpong_common.h"
#include "pp_socket.h"

/* --poll: reads spin instead of sleeping; poll_timeout_ms bounds one read as SO_RCVTIMEO
 * bounds a blocking one. */
static int poll_reads;
static int poll_timeout_ms;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One read that spins on MSG_DONTWAIT until data, end of file, an error or the timeout. The
 * clock is read once per 4096 empty tries so that it costs nothing next to the recv calls. */
static ssize_t polled_read(int fd, void *p, uint64_t len)
{
    double deadline = now_ms() + poll_timeout_ms;
    unsigned tries = 0;
    for (;;) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return n;
        if (++tries % 4096 == 0 && now_ms() > deadline) {
            errno = EAGAIN;
            return -1;
        }
    }
}

static int io_full(int fd, void *buf, uint64_t len, int writing)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = writing      ? write(fd, p, len)
                    : poll_reads ? polled_read(fd, p, len)
                                 : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "raw_tcp_pingpong: %s: %s\n", writing ? "write" : "read",
                    n == 0                                    ? "peer closed the connection"
                    : errno == EAGAIN || errno == EWOULDBLOCK ? "timed out"
                                                              : strerror(errno));
            return -1;
        }
        p += n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* --framed: the header every message carries, as long as bmi_tcp's v2 header. Its bytes are
 * never looked at: what is measured is the cost of carrying them. */
static int framed;
#define FRAME_HEADER_BYTES 32

/* Writes one message: the payload alone, or with --framed header and payload in one writev(),
 * finishing a partial write by plain writes. */
static int send_message(int fd, void *buf, uint64_t len)
{
    unsigned char header[FRAME_HEADER_BYTES] = {0};
    struct iovec iov[2];
    ssize_t n;
    if (!framed)
        return io_full(fd, buf, len, 1);
    iov[0].iov_base = header;
    iov[0].iov_len = sizeof(header);
    iov[1].iov_base = buf;
    iov[1].iov_len = len;
    do {
        n = writev(fd, iov, 2);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        fprintf(stderr, "raw_tcp_pingpong: writev: %s\n", strerror(errno));
        return -1;
    }
    if ((size_t)n < sizeof(header)) {
        if (io_full(fd, header + n, sizeof(header) - (size_t)n, 1) != 0)
            return -1;
        return io_full(fd, buf, len, 1);
    }
    n -= (ssize_t)sizeof(header);
    return io_full(fd, (unsigned char *)buf + n, len - (uint64_t)n, 1);
}

/* Reads one message: with --framed its header first, by a read of its own. */
static int receive_message(int fd, void *buf, uint64_t len)
{
    unsigned char header[FRAME_HEADER_BYTES];
    if (framed && io_full(fd, header, sizeof(header), 0) != 0)
        return -1;
    return io_full(fd, buf, len, 0);
}

struct raw_server
{
    int fd;
    const struct pp_plan *plan;
    unsigned char *buf; /* pp_round_bytes(plan) */
};

/* Takes in every byte of round c: the echo's message, or the whole window (pp_server_ops). */
static int raw_receive(void *state, const struct pp_cursor *c)
{
    struct raw_server *sv = state;
    uint64_t w = pp_window(sv->plan, c->size), i;
    if (framed) {
        for (i = 0; i < w; i++)
            if (receive_message(sv->fd, sv->buf + i * c->size, c->size) != 0)
                return -1;
    } else if (io_full(sv->fd, sv->buf, w * c->size, 0) != 0) {
        return -1;
    }
    return pp_verify_window(sv->plan, c, sv->buf, "raw_tcp_pingpong");
}

/* The echo (latency) or the window's ack (bandwidth). */
static int raw_reply(void *state, const struct pp_cursor *c, const struct pp_cursor *next)
{
    struct raw_server *sv = state;
    uint64_t ack = PP_MAGIC;
    (void)next;
    if (sv->plan->mode == PP_LATENCY)
        return send_message(sv->fd, sv->buf, c->size);
    return io_full(sv->fd, &ack, sizeof(ack), 1);
}

static int run_server(int fd)
{
    struct pp_plan plan;
    struct raw_server sv;
    struct pp_server_ops ops;
    uint64_t ready = PP_MAGIC;
    int rc = -1;
    if (io_full(fd, &plan, sizeof(plan), 0) != 0)
        return -1;
    if (!pp_stream_plan_ok(&plan)) {
        fprintf(stderr, "raw_tcp_pingpong: bad hello (many mode has no raw twin)\n");
        return -1;
    }
    sv.fd = fd;
    sv.plan = &plan;
    sv.buf = malloc(pp_round_bytes(&plan));
    ops.state = &sv;
    ops.receive = raw_receive;
    ops.reply = raw_reply;
    if (sv.buf != NULL && io_full(fd, &ready, sizeof(ready), 1) == 0)
        rc = pp_run_server(&plan, "raw_tcp_pingpong", "", &ops);
    free(sv.buf);
    return rc;
}

/* One ping and its echo over the socket (pp_exchange_fn). */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    int fd = *(const int *)state;
    return send_message(fd, out, size) != 0 || receive_message(fd, in, size) != 0 ? -1 : 0;
}

/* A window of messages, one write() each (--framed: one writev()), then the server's ack
 * (pp_stream_fn). */
static int stream(void *state, uint64_t size, uint64_t window, void *out)
{
    int fd = *(const int *)state;
    uint64_t ack = 0, i;
    for (i = 0; i < window; i++)
        if (send_message(fd, out, size) != 0)
            return -1;
    if (io_full(fd, &ack, sizeof(ack), 0) != 0)
        return -1;
    if (ack != PP_MAGIC) {
        fprintf(stderr, "raw_tcp_pingpong: bad ack\n");
        return -1;
    }
    return 0;
}

static int run_client(int fd, const struct pp_options *o)
{
    unsigned char *out = malloc(o->plan.max_size), *in = malloc(o->plan.max_size);
    uint64_t ready = 0;
    int rc = -1;
    if (out == NULL || in == NULL)
        fprintf(stderr, "raw_tcp_pingpong: out of memory\n");
    else if (io_full(fd, (void *)&o->plan, sizeof(o->plan), 1) == 0 &&
             io_full(fd, &ready, sizeof(ready), 0) == 0)
        rc = pp_run_client(o, "raw_tcp", out, in, ping, stream, &fd);
    free(out);
    free(in);
    return rc;
}

int main(int argc, char **argv)
{
    struct pp_options o;
    int fd, conn, rc;
    rc = pp_parse_options(argc, argv, PP_OPT_STREAMS | PP_OPT_POLL, &o);
    if (rc != 0)
        return rc;
    poll_reads = o.poll_reads;
    framed = o.framed;
    poll_timeout_ms = o.timeout_ms;
    if (o.plan.mode == PP_MANY) {
        fprintf(stderr, "raw_tcp_pingpong: --mode many has no raw twin\n");
        return 2;
    }
    /* A vanished peer must show up as a write error, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    fd = pp_socket_open("raw_tcp_pingpong", &o);
    if (fd < 0)
        return 1;
    if (o.server) {
        rc = pp_socket_print_address("raw_tcp_pingpong", fd);
        conn = rc == 0 ? pp_socket_accept("raw_tcp_pingpong", fd, o.timeout_ms) : -1;
        rc = conn < 0 ? -1 : run_server(conn);
        if (conn >= 0)
            close(conn);
    } else {
        rc = run_client(fd, &o);
    }
    close(fd);
    return rc == 0 ? 0 : 1;
}
