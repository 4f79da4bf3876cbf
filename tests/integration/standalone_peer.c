/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A peer that speaks only the standalone BMI library's legacy tcp framing, written by hand from
 * its wire facts: a 25-byte little-endian header u32 magic 51912, u32 mode (2 unexpected,
 * 4 eager, 8 rendezvous), u32 tag, u32 hash of the sender's address (0 here: a plain client),
 * u64 payload size, u8 message class; the payload follows.
 *
 *   standalone_peer client tcp://HOST:PORT  sends the messages of standalone_peer.h, reads the
 *                                           two replies, checks every byte, prints "OK".
 *   standalone_peer acceptor [N]            prints "ADDR tcp://127.0.0.1:PORT", closes every
 *                                           connection whose first header has another magic
 *                                           ("REJECTED"), prints "MSG mode tag size class ok"
 *                                           per message of the first good one, answers the
 *                                           third with an eager SP_TAG_REPLY_EAGER, prints
 *                                           "DONE". After N rejections (default 2): "GAVE
 *                                           UP", exit 3.
 * Every read and wait is bounded by 10 s. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "standalone_peer.h"

#define MAGIC 51912u
#define HEADER 25
#define UNEXP 2u
#define EAGER 4u
#define REND 8u

struct header
{
    uint32_t magic, mode, tag;
    uint64_t size;
    unsigned msg_class;
};

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    while (bytes-- > 0)
        v = (v << 8) | p[bytes];
    return v;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    int i;
    for (i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int io_all(int fd, unsigned char *buf, size_t size, int writing)
{
    size_t done = 0;
    while (done < size) {
        ssize_t n = writing ? send(fd, buf + done, size - done, MSG_NOSIGNAL)
                            : recv(fd, buf + done, size - done, 0);
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static void fill(unsigned char *buf, size_t size, uint32_t tag)
{
    size_t i;
    for (i = 0; i < size; i++)
        buf[i] = (unsigned char)((i * 7 + tag) & 0xff);
}

static int intact(const unsigned char *buf, size_t size, uint32_t tag)
{
    size_t i;
    for (i = 0; i < size; i++)
        if (buf[i] != (unsigned char)((i * 7 + tag) & 0xff))
            return 0;
    return 1;
}

static int send_message(int fd, uint32_t mode, uint32_t tag, size_t size, unsigned msg_class)
{
    static unsigned char payload[SP_SIZE_LARGE];
    unsigned char h[HEADER];
    put_le(h, MAGIC, 4);
    put_le(h + 4, mode, 4);
    put_le(h + 8, tag, 4);
    put_le(h + 12, 0, 4); /* no address hash: this peer claims no identity */
    put_le(h + 16, size, 8);
    h[24] = (unsigned char)msg_class;
    fill(payload, size, tag);
    return io_all(fd, h, HEADER, 1) == 0 && io_all(fd, payload, size, 1) == 0 ? 0 : -1;
}

/* Reads one header; its payload into buf (at most SP_SIZE_LARGE). -1 on EOF or a bad size. */
static int read_message(int fd, struct header *h, unsigned char *buf)
{
    unsigned char raw[HEADER];
    if (io_all(fd, raw, HEADER, 0) != 0)
        return -1;
    h->magic = (uint32_t)get_le(raw, 4);
    h->mode = (uint32_t)get_le(raw + 4, 4);
    h->tag = (uint32_t)get_le(raw + 8, 4);
    h->size = get_le(raw + 16, 8);
    h->msg_class = raw[24];
    if (h->magic != MAGIC)
        return 0; /* the caller rejects it before reading anything more */
    if (h->size > SP_SIZE_LARGE)
        return -1;
    return io_all(fd, buf, (size_t)h->size, 0);
}

static void bound_reads(int fd)
{
    struct timeval timeout = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

static int run_client(const char *addr)
{
    static unsigned char buf[SP_SIZE_LARGE];
    char host[256];
    const char *h = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr;
    const char *colon = strrchr(h, ':');
    struct addrinfo hints, *res = NULL;
    struct header reply;
    int fd, i;
    if (colon == NULL || (size_t)(colon - h) >= sizeof(host))
        return 2;
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return 2;
    fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        perror("standalone_peer: connect");
        return 1;
    }
    freeaddrinfo(res);
    bound_reads(fd);
    if (send_message(fd, UNEXP, SP_TAG_UNEXP_A, SP_SIZE_UNEXP, SP_CLASS_A) != 0 ||
        send_message(fd, UNEXP, SP_TAG_UNEXP_B, SP_SIZE_UNEXP, SP_CLASS_B) != 0 ||
        send_message(fd, EAGER, SP_TAG_EAGER, SP_SIZE_EAGER, 0) != 0 ||
        send_message(fd, REND, SP_TAG_LARGE, SP_SIZE_LARGE, 0) != 0) {
        perror("standalone_peer: send");
        return 1;
    }
    for (i = 0; i < 2; i++) {
        const uint32_t tag = i == 0 ? SP_TAG_REPLY_EAGER : SP_TAG_REPLY_LARGE;
        const uint32_t mode = i == 0 ? EAGER : REND;
        const uint64_t size = i == 0 ? SP_SIZE_EAGER : SP_SIZE_LARGE;
        if (read_message(fd, &reply, buf) != 0 || reply.magic != MAGIC || reply.tag != tag ||
            reply.mode != mode || reply.size != size || !intact(buf, (size_t)size, tag)) {
            fprintf(stderr, "standalone_peer: reply %d wrong (magic %u mode %u tag %u size %llu)\n",
                    i, reply.magic, reply.mode, reply.tag, (unsigned long long)reply.size);
            return 1;
        }
    }
    printf("OK\n");
    fflush(stdout);
    close(fd);
    return 0;
}

/* Serves one connection; 1 once it delivered three messages and the reply, 0 if rejected. */
static int serve(int fd)
{
    static unsigned char buf[SP_SIZE_LARGE];
    struct header h;
    int n;
    bound_reads(fd);
    for (n = 0; n < 3; n++) {
        if (read_message(fd, &h, buf) != 0)
            return n == 0 ? 0 : -1;
        if (h.magic != MAGIC) {
            printf("REJECTED\n");
            fflush(stdout);
            return 0;
        }
        printf("MSG %u %u %llu %u %s\n", h.mode, h.tag, (unsigned long long)h.size, h.msg_class,
               intact(buf, (size_t)h.size, h.tag) ? "ok" : "bad");
        fflush(stdout);
    }
    if (send_message(fd, EAGER, SP_TAG_REPLY_EAGER, SP_SIZE_UNEXP, 0) != 0)
        return -1;
    printf("DONE\n");
    fflush(stdout);
    while (recv(fd, buf, sizeof(buf), 0) > 0)
        ; /* until the client closes (or 10 s pass) */
    return 1;
}

static int run_acceptor(int give_up)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int listener = socket(AF_INET, SOCK_STREAM, 0), rejected = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(listener, 4) != 0 ||
        getsockname(listener, (struct sockaddr *)&sa, &len) != 0)
        return 1;
    printf("ADDR tcp://127.0.0.1:%u\n", (unsigned)ntohs(sa.sin_port));
    fflush(stdout);
    while (rejected < give_up) {
        struct pollfd p = {listener, POLLIN, 0};
        int fd, rc;
        if (poll(&p, 1, 10000) != 1 || (fd = accept(listener, NULL, NULL)) < 0)
            return 1;
        rc = serve(fd);
        close(fd);
        if (rc != 0)
            return rc > 0 ? 0 : 1;
        rejected++;
    }
    printf("GAVE UP\n");
    return 3;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "client") == 0)
        return run_client(argv[2]);
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "acceptor") == 0)
        return run_acceptor(argc == 3 ? atoi(argv[2]) : 2);
    fprintf(stderr, "usage: %s client tcp://HOST:PORT | acceptor\n", argv[0]);
    return 2;
}
