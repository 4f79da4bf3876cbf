/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* BMI_TRUSTED_CONNECTION as OrangeFS built with --enable-trusted-connections uses it: this
 * program defines OrangeFS's two accessors itself, over a configuration of its own, and libbmi
 * (linked as a shared library) must find them. It serves on 127.0.0.1 and checks that a
 * connection from outside the trusted ports or networks is closed at once, and that a libbmi
 * client from inside is served: one whose port the kernel picked (tcp_source_ports=none), one
 * that binds from port 1023 down as OrangeFS's clients do (a process with the accessors is
 * OrangeFS built with trusted connections; only with the privilege), and one that binds into a
 * range outside the kernel's, from a policy it is given or from tcp_source_ports. Run as
 * "trusted_connection_test client ADDRESS [FIRST LAST]" it is that client (with the ports
 * policy FIRST-LAST): one unexpected message, then exit 0. */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bmi.h"

#define HELLO_TAG 77

/* The test's own layout: libbmi never looks inside, only OrangeFS's accessors do. */
struct server_configuration_s
{
    int ports_enabled;
    unsigned long ports[2];
    int networks_enabled;
    int count;
    char **networks;
    int *masks;
};

int PINT_config_get_allowed_ports(struct server_configuration_s *config, int *enabled,
                                  unsigned long *allowed_ports)
{
    if (config == NULL)
        return -1;
    *enabled = config->ports_enabled;
    if (*enabled == 1) {
        allowed_ports[0] = config->ports[0];
        allowed_ports[1] = config->ports[1];
    }
    return 0;
}

int PINT_config_get_allowed_networks(struct server_configuration_s *config, int *enabled,
                                     int *count, char ***networks, int **masks)
{
    if (config == NULL)
        return -1;
    *enabled = config->networks_enabled;
    if (*enabled == 1) {
        *count = config->count;
        *networks = config->networks;
        *masks = config->masks;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int run_client(const char *address, const char *first, const char *last)
{
    BMI_addr_t server;
    bmi_context_id context;
    bmi_op_id_t id;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    void *user = NULL;
    int outcount = 0, rc;
    double deadline = now_ms() + 10000;
    static const char hello[] = "trusted?";

    if (BMI_initialize("bmi_tcp", NULL, 0, NULL) != 0 || BMI_open_context(&context) != 0)
        return 3;
    if (first != NULL) {
        struct server_configuration_s policy;
        memset(&policy, 0, sizeof policy);
        policy.ports_enabled = 1;
        policy.ports[0] = strtoul(first, NULL, 10);
        policy.ports[1] = strtoul(last, NULL, 10);
        if (BMI_set_info(0, BMI_TRUSTED_CONNECTION, &policy) != 0)
            return 3;
    }
    if (BMI_addr_lookup(&server, address, NULL) != 0)
        return 3;
    rc = BMI_post_sendunexpected(&id, server, hello, sizeof hello, BMI_EXT_ALLOC, HELLO_TAG, NULL,
                                 context, NULL);
    if (rc < 0)
        return 1;
    outcount = rc;
    while (outcount == 0 && now_ms() < deadline)
        if (BMI_test(id, &outcount, &error, &actual, &user, 100, context) < 0)
            return 1;
    BMI_close_context(context);
    BMI_finalize();
    return outcount == 1 && error == 0 ? 0 : 1;
}

static int failures;

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "FAILED at line %d: %s\n", __LINE__, #cond); \
            ++failures;                                                  \
        }                                                                \
    } while (0)

/* The server progresses (accepts) only inside BMI calls: this one, for up to ms. Returns 1
 * and frees the message if an unexpected hello arrived. */
static int serve_for(double ms)
{
    struct BMI_unexpected_info info;
    int outcount = 0;
    double deadline = now_ms() + ms;
    while (now_ms() < deadline) {
        if (BMI_testunexpected(1, &outcount, &info, 20) < 0)
            return 0;
        if (outcount == 1) {
            BMI_unexpected_free(info.addr, info.buffer);
            return info.error_code == 0 && info.tag == HELLO_TAG;
        }
    }
    return 0;
}

/* Connects a raw socket from 127.0.0.1:source_port (0: any) and serves until the server closes
 * it: 1 if closed within 1.5 s (refused: the server closes at accept), 0 if still open (the
 * server's handshake timeout is 10 s), -1 if the connection could not be made. */
static int refused_raw(int server_port, int source_port)
{
    struct sockaddr_in to, from;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, result = 0;
    double deadline = now_ms() + 1500;
    if (fd < 0)
        return -1;
    memset(&from, 0, sizeof from);
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    from.sin_port = htons((unsigned short)source_port);
    to = from;
    to.sin_port = htons((unsigned short)server_port);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    while (now_ms() < deadline && result == 0) {
        struct pollfd p = {fd, POLLIN, 0};
        char byte;
        serve_for(20);
        if (poll(&p, 1, 0) == 1 && recv(fd, &byte, 1, MSG_DONTWAIT) <= 0)
            result = 1;
    }
    close(fd);
    return result;
}

/* Starts this program as a libbmi client of address (with the ports policy first-last unless
 * first is NULL); 1 if the server got its hello and the client exited 0. Its exit status goes
 * to *exit_status if that is not NULL. */
static int client_served(const char *self, const char *address, const char *first, const char *last,
                         int *exit_status)
{
    char *argv[] = {(char *)self, "client", (char *)address, (char *)first, (char *)last, NULL};
    extern char **environ;
    pid_t pid;
    int status = -1, got;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
        return 0;
    /* Until its hello comes, or it has ended (refused) and what it sent before is read. */
    got = 0;
    for (double deadline = now_ms() + 10000; !got && now_ms() < deadline;) {
        got = serve_for(50);
        if (!got && waitpid(pid, &status, WNOHANG) == pid) {
            got = serve_for(200);
            if (exit_status != NULL)
                *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
    }
    /* Bounded: the client gives up after 10 s on its own; kill it if it has not. */
    for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; ++i)
        serve_for(50);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    if (exit_status != NULL)
        *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int served_client(const char *self, const char *address)
{
    return client_served(self, address, NULL, NULL, NULL);
}

/* 0 if this process can bind port of 127.0.0.1 now, else the errno of the refusal. */
static int bind_error(int port)
{
    struct sockaddr_in at;
    int fd = socket(AF_INET, SOCK_STREAM, 0), error;
    if (fd < 0)
        return errno;
    memset(&at, 0, sizeof at);
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    at.sin_port = htons((unsigned short)port);
    error = bind(fd, (struct sockaddr *)&at, sizeof at) == 0 ? 0 : errno;
    close(fd);
    return error;
}

/* A port of 127.0.0.1 this user can bind below low (the kernel's range), or 0. */
static int port_outside(int low)
{
    for (int port = low - 1; port >= 1024 && port > low - 2000; --port)
        if (bind_error(port) == 0)
            return port;
    return 0;
}

/* The lowest of width consecutive bindable ports of 127.0.0.1 below `below`, or 0. */
static int free_window(int below, int width)
{
    for (int top = below - 1; top - width >= 1024 && top > below - 4000; top -= width) {
        int all = 1;
        for (int port = top - width + 1; port <= top && all; ++port)
            all = bind_error(port) == 0;
        if (all)
            return top - width + 1;
    }
    return 0;
}

enum
{
    window_width = 4
};

/* 1 if this process may bind a port of 127.0.0.1 below `limit` (root, a capability, or a lowered
 * ip_unprivileged_port_start): the first port below it that is not in use binds. */
static int can_bind_below(int limit)
{
    for (int port = limit - 1; port >= 1000; --port) {
        const int error = bind_error(port);
        if (error != EADDRINUSE)
            return error == 0;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct server_configuration_s config;
    char *loopback_net[] = {"tcp://127.0.0.0"}, *other_net[] = {"tcp://10.0.0.0"};
    char *bad_net[] = {"tcp://300.0.0.0"};
    int mask8[] = {8};
    const char *listen = NULL;
    char address[128];
    int low = 0, high = 0, server_port, outside, window, status = -1, privileged;
    char first[16], last[16], setting[40];
    FILE *range;

    if (argc == 3 && strcmp(argv[1], "client") == 0)
        return run_client(argv[2], NULL, NULL);
    if (argc == 5 && strcmp(argv[1], "client") == 0)
        return run_client(argv[2], argv[3], argv[4]);
    signal(SIGPIPE, SIG_IGN);
    /* libbmi clients take their source port from the kernel's ephemeral range. */
    range = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (range == NULL || fscanf(range, "%d %d", &low, &high) != 2) {
        fprintf(stderr, "SKIP: no ip_local_port_range\n");
        return 77;
    }
    fclose(range);
    outside = port_outside(low);
    if (outside == 0) {
        fprintf(stderr, "SKIP: no bindable port below the ephemeral range %d-%d\n", low, high);
        return 77;
    }
    window = free_window(outside, window_width);
    if (window == 0) {
        fprintf(stderr, "SKIP: no %d bindable ports below %d\n", window_width, outside);
        return 77;
    }
    privileged = can_bind_below(1024);
    /* Until the cases of bound ports below, clients take the kernel's port. */
    setenv("BMI_TCP_SOURCE_PORTS", "none", 1);
    if (BMI_initialize("bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, NULL) != 0 ||
        BMI_get_info(0, BMI_GET_METH_ADDR, &listen) != 0 || listen == NULL) {
        fprintf(stderr, "server setup failed\n");
        return 1;
    }
    snprintf(address, sizeof address, "%s", listen);
    server_port = atoi(strrchr(address, ':') + 1);

    /* Nothing set yet: a connection stays open (any source port: the one below is kept
     * unused, since a second connect from it would find the first still in TIME_WAIT). */
    CHECK(refused_raw(server_port, 0) == 0);

    memset(&config, 0, sizeof config);
    config.ports_enabled = 1;
    config.ports[0] = (unsigned long)low;
    config.ports[1] = (unsigned long)high;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == 0);
    CHECK(refused_raw(server_port, outside) == 1);
    CHECK(served_client(argv[0], address));

    config.ports_enabled = 0;
    config.networks_enabled = 1;
    config.count = 1;
    config.networks = other_net;
    config.masks = mask8;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == 0);
    CHECK(refused_raw(server_port, 0) == 1);
    CHECK(!served_client(argv[0], address));

    config.networks = loopback_net;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == 0);
    CHECK(refused_raw(server_port, 0) == 0);
    CHECK(served_client(argv[0], address));

    /* A malformed network is refused and changes nothing: 127.0.0.0/8 still holds. */
    config.networks = bad_net;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == -BMI_EINVAL);
    CHECK(served_client(argv[0], address));

    /* OrangeFS's clients bind from port 1023 down, and so does libbmi in such a process: with
     * the privilege they get in where only those ports are trusted, without it they do not. */
    unsetenv("BMI_TCP_SOURCE_PORTS");
    memset(&config, 0, sizeof config);
    config.ports_enabled = 1;
    config.ports[0] = 1;
    config.ports[1] = 1023;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == 0);
    CHECK(served_client(argv[0], address) == privileged);

    /* Ports the kernel never picks: only a client that binds into them gets in. */
    memset(&config, 0, sizeof config);
    config.ports_enabled = 1;
    config.ports[0] = (unsigned long)window;
    config.ports[1] = (unsigned long)window + window_width - 1;
    CHECK(BMI_set_info(0, BMI_TRUSTED_CONNECTION, &config) == 0);
    snprintf(first, sizeof first, "%d", window);
    snprintf(last, sizeof last, "%d", window + window_width - 1);
    CHECK(!served_client(argv[0], address));
    CHECK(client_served(argv[0], address, first, last, NULL));
    snprintf(setting, sizeof setting, "%s-%s", first, last);
    setenv("BMI_TCP_SOURCE_PORTS", setting, 1);
    CHECK(served_client(argv[0], address));
    /* "none" keeps the kernel's port whatever the policy says. */
    setenv("BMI_TCP_SOURCE_PORTS", "none", 1);
    CHECK(!client_served(argv[0], address, first, last, NULL));
    /* A malformed value fails the client's BMI_initialize (exit 3). */
    setenv("BMI_TCP_SOURCE_PORTS", "2000-1000", 1);
    CHECK(!client_served(argv[0], address, NULL, NULL, &status));
    CHECK(status == 3);
    unsetenv("BMI_TCP_SOURCE_PORTS");

    BMI_finalize();
    if (failures == 0)
        printf("trusted connections: all checks passed (ports %d-%d, refused port %d, bound "
               "ports %d-%d, ports below 1024 %s)\n",
               low, high, outside, window, window + window_width - 1,
               privileged ? "bound" : "refused");
    return failures == 0 ? 0 : 1;
}
