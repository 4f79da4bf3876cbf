/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The start every tcp client of the integration tests shares: a client-only BMI, one context and
 * the server's address. */
#ifndef TCP_CLIENT_START_H
#define TCP_CLIENT_START_H

#include <stdio.h>

#include "bmi.h"

/* 0, or the failed call's error after printing it under program's name. */
static inline int tcp_client_start(const char *program, const char *server_addr,
                                   bmi_context_id *context, BMI_addr_t *server)
{
    const char *what = "BMI_initialize";
    int rc = BMI_initialize("bmi_tcp", NULL, 0, NULL);
    if (rc >= 0 && (rc = BMI_open_context(context)) < 0)
        what = "BMI_open_context";
    else if (rc >= 0 && (rc = BMI_addr_lookup(server, server_addr, NULL)) < 0)
        what = "BMI_addr_lookup";
    if (rc < 0)
        fprintf(stderr, "%s: %s: %s\n", program, what, bmi_status_string(rc));
    return rc < 0 ? rc : 0;
}

#endif /* TCP_CLIENT_START_H */
