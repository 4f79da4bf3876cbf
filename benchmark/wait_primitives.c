/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a sleeping ping-pong costs by the way each side waits, with nothing else in the loop:
 * two processes (pinned to one CPU, or to two with --cpus A,B) wake each other through an
 * eventfd each, or a futex word in shared memory, and each waits in one of several ways. It
 * separates the cost of the wait from the cost of libbmi's own path: bmi_shm with
 * BMI_SHM_SPIN_US=0 waits the "epoll-et" way (an edge-triggered eventfd in an epoll set, never
 * read), and its deadline lives in a timerfd, so its epoll_wait has no timeout of its own
 * (bmi/core/wait_point.hpp). doc/perf/placement.md has a table of these.
 *   wait_primitives [--cpus A,B] [--iters N]   prints one line per way: one-way microseconds
 */
#define _GNU_SOURCE

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum way
{
    blocking_read,
    epoll_et,
    epoll_et_timeout,
    epoll_then_read,
    poll_then_read,
    futex_plain,
    futex_timeout,
    way_count
};

static const char *const way_names[way_count] = {
    "read (blocking; the eventfd ping-pong)", "epoll-et (no timeout, never read; libbmi)",
    "epoll-et with a 10 ms timeout",          "epoll_wait with a 10 ms timeout, then read",
    "poll with a 10 ms timeout, then read",   "futex wait, no timeout",
    "futex wait with a 10 ms timeout",
};

/* The futex words, one per side, each on its own cache line. */
struct words
{
    uint32_t word[2][16];
};

struct side
{
    enum way way;
    int own_fd, peer_fd, epoll_fd;
    uint32_t *own_word, *peer_word;
    uint32_t seen;
};

static const struct timespec ten_ms = {0, 10 * 1000 * 1000};

static long futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

static int wake_peer(struct side *s)
{
    if (s->way == futex_plain || s->way == futex_timeout) {
        __atomic_fetch_add(s->peer_word, 1, __ATOMIC_SEQ_CST);
        futex(s->peer_word, FUTEX_WAKE, 1, NULL);
        return 0;
    }
    uint64_t one = 1;
    return write(s->peer_fd, &one, sizeof one) == sizeof one ? 0 : -1;
}

/* Waits for the peer's next wake-up; -1 on an unexpected failure. */
static int wait_once(struct side *s)
{
    uint64_t count;
    struct epoll_event event;
    struct pollfd p = {s->own_fd, POLLIN, 0};
    switch (s->way) {
    case blocking_read:
        return read(s->own_fd, &count, sizeof count) == sizeof count ? 0 : -1;
    case epoll_et:
    case epoll_et_timeout:
        while (epoll_wait(s->epoll_fd, &event, 1, s->way == epoll_et ? -1 : 10) != 1) {
        }
        return 0;
    case epoll_then_read:
        while (epoll_wait(s->epoll_fd, &event, 1, 10) != 1) {
        }
        return read(s->own_fd, &count, sizeof count) == sizeof count ? 0 : -1;
    case poll_then_read:
        while (poll(&p, 1, 10) != 1) {
        }
        return read(s->own_fd, &count, sizeof count) == sizeof count ? 0 : -1;
    case futex_plain:
    case futex_timeout:
        while (__atomic_load_n(s->own_word, __ATOMIC_SEQ_CST) == s->seen)
            futex(s->own_word, FUTEX_WAIT, s->seen, s->way == futex_plain ? NULL : &ten_ms);
        s->seen = __atomic_load_n(s->own_word, __ATOMIC_SEQ_CST);
        return 0;
    default:
        return -1;
    }
}

static int pin(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One way, measured: one-way microseconds, or a negative value on failure. */
static double measure(enum way way, int parent_cpu, int child_cpu, long iters, struct words *words)
{
    const int edge = way == epoll_et || way == epoll_et_timeout;
    const int flags = EFD_CLOEXEC | (edge ? EFD_NONBLOCK : 0);
    int fds[2] = {eventfd(0, flags), eventfd(0, flags)};
    if (fds[0] < 0 || fds[1] < 0)
        return -1;
    memset(words, 0, sizeof *words);
    pid_t child = fork();
    if (child < 0)
        return -1;
    const int me = child == 0;
    pin(me ? child_cpu : parent_cpu); /* both checked in main */
    struct side s = {way,
                     fds[me],
                     fds[!me],
                     epoll_create1(EPOLL_CLOEXEC),
                     &words->word[me][0],
                     &words->word[!me][0],
                     0};
    struct epoll_event interest = {EPOLLIN | (edge ? EPOLLET : 0), {.u64 = 0}};
    if (s.epoll_fd < 0 || epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.own_fd, &interest) != 0)
        _exit(2);
    double start = now_us();
    int ok = 1;
    for (long i = 0; i < iters && ok; ++i) {
        if (!me)
            ok = wake_peer(&s) == 0;
        if (ok)
            ok = wait_once(&s) == 0;
        if (ok && me)
            ok = wake_peer(&s) == 0;
    }
    double elapsed = now_us() - start;
    if (me)
        _exit(ok ? 0 : 3);
    if (!ok)
        kill(child, SIGKILL); /* it may wait for a wake-up that never comes */
    int status = 0;
    waitpid(child, &status, 0);
    close(s.epoll_fd);
    close(fds[0]);
    close(fds[1]);
    if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return elapsed / (double)iters / 2;
}

int main(int argc, char **argv)
{
    int parent_cpu = 0, child_cpu = 0;
    long iters = 50000;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc &&
            sscanf(argv[++i], "%d,%d", &parent_cpu, &child_cpu) == 2)
            continue;
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc && (iters = atol(argv[++i])) > 0)
            continue;
        fprintf(stderr, "usage: %s [--cpus A,B] [--iters N]\n", argv[0]);
        return 2;
    }
    if (pin(child_cpu) != 0 || pin(parent_cpu) != 0) {
        fprintf(stderr, "wait_primitives: --cpus %d,%d: not CPUs this process may use\n",
                parent_cpu, child_cpu);
        return 2;
    }
    struct words *words =
        mmap(NULL, sizeof *words, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (words == MAP_FAILED)
        return 1;
    printf("# wait_primitives: CPUs %d,%d, %ld round trips per way\n", parent_cpu, child_cpu,
           iters);
    int failed = 0;
    for (int w = 0; w < way_count; ++w) {
        double us = measure((enum way)w, parent_cpu, child_cpu, iters, words);
        if (us < 0) {
            printf("%-46s failed\n", way_names[w]);
            failed = 1;
        } else {
            printf("%-46s %8.3f us one way\n", way_names[w], us);
        }
        fflush(stdout);
    }
    return failed;
}
