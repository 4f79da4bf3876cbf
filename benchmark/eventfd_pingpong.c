/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The floor for a sleeping shared-memory transport: two processes waking each other through a
 * pair of eventfds with blocking reads, no data moved. Prints one pingpong-format row (8 bytes,
 * the eventfd counter), to set beside bmi_shm with BMI_SHM_SPIN_US=0. `--cpus A,B` (first
 * argument only) pins the parent to CPU A and the child to CPU B: a sleeping ping-pong costs
 * a context switch when both share a CPU and an inter-processor wake-up when they do not, and
 * the two differ twentyfold on a VM. `--epoll` (first argument, or after --cpus) sleeps in
 * epoll_wait on a set holding the eventfd edge-triggered (never read back) instead of in
 * read(), as libbmi's wait point does: the floor of a transport that waits on a set of fds. */
#define _GNU_SOURCE

#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pingpong_common.h"

struct pair
{
    int to_child;
    int to_parent;
    int epoll_fd; /* this process's set in --epoll mode, else -1 */
};

static int kick(int fd)
{
    uint64_t one = 1;
    return write(fd, &one, sizeof(one)) == (ssize_t)sizeof(one) ? 0 : -1;
}

static int await(int epoll_fd, int fd)
{
    uint64_t value = 0;
    struct epoll_event event;
    if (epoll_fd < 0)
        return read(fd, &value, sizeof(value)) == (ssize_t)sizeof(value) ? 0 : -1;
    /* Edge-triggered: each write is one wake-up, with nothing to read back. */
    for (;;) {
        int n = epoll_wait(epoll_fd, &event, 1, -1);
        if (n == 1)
            return 0;
        if (n < 0)
            return -1;
    }
}

/* An epoll set holding fd edge-triggered, or -1. */
static int watch(int fd)
{
    struct epoll_event event;
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    memset(&event, 0, sizeof(event));
    event.events = EPOLLIN | EPOLLET;
    if (epoll_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0)
        return -1;
    return epoll_fd;
}

/* One wake-up each way (pp_exchange_fn); the buffers are not used. */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    const struct pair *p = state;
    (void)size;
    (void)out;
    (void)in;
    return kick(p->to_child) == 0 && await(p->epoll_fd, p->to_parent) == 0 ? 0 : -1;
}

/* Pins process `who` (0: this one) to `cpu`; nothing to do for cpu < 0. */
static int pin(pid_t who, int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return 0;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(who, sizeof(set), &set);
}

/* What a --cpus that cannot be used gets: exit status 2, as for any bad option. */
static int bad_cpus(void)
{
    fprintf(stderr, "eventfd_pingpong: --cpus wants two CPUs this process may use, A,B\n");
    return 2;
}

int main(int argc, char **argv)
{
    /* pingpong's option parser, posing as a client, so --iters means what it means there;
     * the size is fixed at 8 bytes. */
    static const char *const prefix[] = {"--client", "eventfd-child", NULL};
    static const char *const suffix[] = {"--min", "8", "--max", "8", NULL};
    struct pp_options o;
    struct pair p;
    unsigned char buf[8];
    pid_t child;
    int rc, status = 0;
    int parent_cpu = -1, child_cpu = -1;
    int use_epoll = 0;

    rc = pp_take_cpus(&argc, &argv, "eventfd_pingpong", &parent_cpu, &child_cpu);
    if (rc != 0)
        return rc;
    if (argc > 1 && strcmp(argv[1], "--epoll") == 0) {
        use_epoll = 1;
        argv[1] = argv[0];
        argc--;
        argv++;
    }
    rc = pp_parse_posing(argc, argv, prefix, suffix, 0, &o);
    if (rc != 0)
        return rc;
    o.plan.check = 0;
    p.to_child = eventfd(0, EFD_CLOEXEC);
    p.to_parent = eventfd(0, EFD_CLOEXEC);
    p.epoll_fd = -1;
    if (p.to_child < 0 || p.to_parent < 0) {
        perror("eventfd_pingpong: eventfd");
        return 1;
    }
    child = fork();
    if (child < 0) {
        perror("eventfd_pingpong: fork");
        return 1;
    }
    if (child == 0) {
        /* Echo until the parent goes away; it never outlives its parent. */
        int child_set = use_epoll ? watch(p.to_child) : -1;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (use_epoll && child_set < 0)
            _exit(1);
        for (;;)
            if (await(child_set, p.to_child) != 0 || kick(p.to_parent) != 0)
                _exit(1);
    }
    /* The parent pins both before the first wake-up, so a CPU it may not use is reported
     * here and nobody waits for a child that could not start. */
    if (pin(child, child_cpu) != 0 || pin(0, parent_cpu) != 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        return bad_cpus();
    }
    if (use_epoll && (p.epoll_fd = watch(p.to_parent)) < 0) {
        perror("eventfd_pingpong: epoll");
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        return 1;
    }
    memset(buf, 0, sizeof(buf));
    rc = pp_run_client(&o, "eventfd", buf, buf, ping, NULL, &p);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return rc == 0 ? 0 : 1;
}
