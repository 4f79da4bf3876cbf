/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU-bound neighbour: a tight arithmetic loop whose rate says how much of its core the other
 * tasks there left it. The neighbour study pins it to the core of a waiting libbmi client
 * and compares the rate with the rate alone (issue 18, a neighbour's fair share).
 *
 * Alone it counts for --seconds and prints the rate. With --on-signal it prints READY, starts
 * at SIGUSR1 and stops at SIGUSR2 (or after --seconds, a bound for a harness that died), so
 * that a harness can measure the loop over exactly the window in which its client runs. */
#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(void)
{
    fprintf(stderr, "usage: cpu_neighbour [--seconds S (default 1, at most 3600)] [--on-signal]\n"
                    "  prints: iterations N seconds S per_second R cpu_seconds C\n"
                    "  --on-signal: prints READY, counts from SIGUSR1 to SIGUSR2 (or S seconds)\n");
    return 2;
}

/* The loop: one dependent multiply-add per iteration, so its rate is the core's share and not
 * a memory system's; the stop flag is the only load. */
static uint64_t count_until_stopped(void)
{
    uint64_t n = 0, x = 1;
    while (!stop) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x)); /* keeps the chain from being folded away */
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    double seconds = 1.0, t0, t1, c0, c1;
    int on_signal = 0, i, sig;
    struct sigaction sa;
    struct itimerval bound;
    sigset_t controls, start;
    uint64_t n;

    for (i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--on-signal") == 0) {
            on_signal = 1;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            errno = 0;
            seconds = strtod(argv[++i], &end);
            if (errno != 0 || end == argv[i] || *end != '\0' || !(seconds > 0) || seconds > 3600) {
                fprintf(stderr, "cpu_neighbour: bad --seconds %s\n", argv[i]);
                return usage();
            }
        } else {
            fprintf(stderr, "cpu_neighbour: bad argument %s\n", argv[i]);
            return usage();
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the harness that started it */

    /* The signals stay blocked until the loop starts, so none is lost before READY. */
    sigemptyset(&controls);
    sigaddset(&controls, SIGUSR1);
    sigaddset(&controls, SIGUSR2);
    sigaddset(&controls, SIGALRM);
    sigprocmask(SIG_BLOCK, &controls, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    if (on_signal) {
        printf("READY\n");
        fflush(stdout);
        sigemptyset(&start);
        sigaddset(&start, SIGUSR1);
        if (sigwait(&start, &sig) != 0)
            return 1;
    }
    memset(&bound, 0, sizeof(bound));
    bound.it_value.tv_sec = (time_t)seconds;
    bound.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
    if (bound.it_value.tv_sec == 0 && bound.it_value.tv_usec == 0)
        bound.it_value.tv_usec = 1;
    t0 = now_s(CLOCK_MONOTONIC);
    c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    setitimer(ITIMER_REAL, &bound, NULL);
    /* A SIGUSR2 that came early stops us at once; a second SIGUSR1 stays blocked, harmless. */
    sigdelset(&controls, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &controls, NULL);
    n = count_until_stopped();
    c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    t1 = now_s(CLOCK_MONOTONIC);
    /* The CPU time says which share of the core the loop had; the rate is the share times
     * the core's speed, which other load on the machine (or its host) moves as well. */
    printf("iterations %llu seconds %.6f per_second %.0f cpu_seconds %.6f\n", (unsigned long long)n,
           t1 - t0, t1 > t0 ? (double)n / (t1 - t0) : 0.0, c1 - c0);
    return 0;
}
