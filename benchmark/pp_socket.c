/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _POSIX_C_SOURCE 200809L

#include "pp_socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Splits "tcp://host:port" (host may be "[v6]") into host and port; returns 0 on success. */
static int split_address(const char *addr, char *host, size_t host_len, char *port, size_t port_len)
{
    const char *colon, *h = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr;
    size_t n;
    colon = strrchr(h, ':');
    if (colon == NULL || colon == h || strlen(colon + 1) == 0 || strlen(colon + 1) >= port_len)
        return -1;
    n = (size_t)(colon - h);
    if (h[0] == '[' && colon[-1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= host_len)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

/* Bounds every blocking call on fd, and turns off Nagle so small pings leave at once. */
static int tune(const char *tool, int fd, int timeout_ms)
{
    struct timeval tv;
    int one = 1;
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        fprintf(stderr, "%s: setsockopt: %s\n", tool, strerror(errno));
        return -1;
    }
    return 0;
}

int pp_socket_open(const char *tool, const struct pp_options *o)
{
    char host[256], port[16];
    struct addrinfo hints, *res = NULL, *ai;
    int fd = -1, rc, one = 1;
    if (split_address(o->addr, host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "%s: bad address '%s'\n", tool, o->addr);
        return -1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = o->server ? AI_PASSIVE : 0;
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", tool, o->addr, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0)
            continue;
        /* SO_SNDTIMEO also bounds connect() on Linux. */
        if (tune(tool, fd, o->timeout_ms) == 0 &&
            (o->server ? setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                             bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1) == 0
                       : connect(fd, ai->ai_addr, ai->ai_addrlen) == 0))
            break;
        fprintf(stderr, "%s: %s: %s\n", tool, o->server ? "bind/listen" : "connect",
                strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int pp_socket_print_address(const char *tool, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[256], port[16];
    char shown[300];
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fprintf(stderr, "%s: getsockname: %s\n", tool, strerror(errno));
        return -1;
    }
    snprintf(shown, sizeof(shown), strchr(host, ':') ? "[%s]" : "%s", host);
    printf("ADDR tcp://%s:%s\n", shown, port);
    fflush(stdout);
    return 0;
}

int pp_socket_accept(const char *tool, int listener, int timeout_ms)
{
    struct pollfd pfd;
    int fd, rc;
    pfd.fd = listener;
    pfd.events = POLLIN;
    do
        rc = poll(&pfd, 1, timeout_ms);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0) {
        fprintf(stderr, "%s: no client within %d ms\n", tool, timeout_ms);
        return -1;
    }
    fd = accept(listener, NULL, NULL);
    if (fd < 0) {
        fprintf(stderr, "%s: accept: %s\n", tool, strerror(errno));
        return -1;
    }
    if (tune(tool, fd, timeout_ms) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}
