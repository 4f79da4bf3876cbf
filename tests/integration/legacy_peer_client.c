/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A peer speaking the legacy OrangeFS tcp wire format by hand: an unexpected hello, then the
 * header and the first part of a large rendezvous message, then nothing until it is killed.
 *
 * Wire format (SPEC 3): 24-byte little-endian header u32 magic 51903, u32 mode (2 unexpected,
 * 8 rendezvous), u64 tag sign-extended, u64 payload size; the payload follows. The payload is
 * written without blocking and never more than half of it, so the message is cut short for
 * certain: "STALLED <bytes of payload sent>". */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "killed_peer.h"

#define MAGIC 51903u
#define MODE_UNEXP 2u
#define MODE_REND 8u

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    int i;
    for (i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int send_header(int fd, uint32_t mode, int32_t tag, uint64_t size)
{
    unsigned char h[24];
    put_le(h, MAGIC, 4);
    put_le(h + 4, mode, 4);
    put_le(h + 8, (uint64_t)(int64_t)tag, 8);
    put_le(h + 16, size, 8);
    return write(fd, h, sizeof(h)) == (ssize_t)sizeof(h) ? 0 : -1;
}

static int connect_to(const char *addr)
{
    char host[256];
    const char *h = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr;
    const char *colon = strrchr(h, ':');
    struct addrinfo hints, *res = NULL;
    int fd, rc;
    if (colon == NULL || (size_t)(colon - h) >= sizeof(host))
        return -1;
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    if ((rc = getaddrinfo(host, colon + 1, &hints, &res)) != 0) {
        fprintf(stderr, "legacy_peer_client: %s: %s\n", addr, gai_strerror(rc));
        return -1;
    }
    fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int main(int argc, char **argv)
{
    static const char hello[] = "hello";
    uint64_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 8u << 20;
    uint64_t sent = 0, half = size / 2;
    unsigned char chunk[65536];
    int fd;

    if (argc < 2 || size < 2) {
        fprintf(stderr, "usage: %s tcp://HOST:PORT [SIZE]\n", argv[0]);
        return 2;
    }
    fd = connect_to(argv[1]);
    if (fd < 0) {
        perror("legacy_peer_client: connect");
        return 1;
    }
    if (send_header(fd, MODE_UNEXP, KP_TAG_HELLO, sizeof(hello)) != 0 ||
        write(fd, hello, sizeof(hello)) != (ssize_t)sizeof(hello) ||
        send_header(fd, MODE_REND, KP_TAG_BIG, size) != 0) {
        perror("legacy_peer_client: write");
        return 1;
    }
    memset(chunk, 0x5a, sizeof(chunk));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (sent < half) {
        size_t n = half - sent < sizeof(chunk) ? (size_t)(half - sent) : sizeof(chunk);
        ssize_t w = write(fd, chunk, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; /* the server reads nothing before its receive is posted */
        if (w < 0) {
            perror("legacy_peer_client: write payload");
            return 1;
        }
        sent += (uint64_t)w;
    }
    printf("STALLED %llu\n", (unsigned long long)sent);
    fflush(stdout);
    for (;;)
        pause(); /* the socket stays open, the message unfinished, until SIGKILL */
}
