/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Takes SIGTERM and SIGUSR1 as it is loaded, as a library with a constructor of its own may. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t taken_count;

static void take(int sig)
{
    (void)sig;
    taken_count++;
}

__attribute__((constructor)) static void take_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = take;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* How many signals reached the library's handler. */
int signal_taker_count(void)
{
    return (int)taken_count;
}
