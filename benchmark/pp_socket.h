/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The TCP sockets of the baselines that speak TCP without BMI (raw_tcp_pingpong.c,
 * tls_pingpong.c): one listening or connected socket for a tcp://HOST:PORT address, with every
 * blocking call bounded and Nagle off. Messages start with the tool's name. */
#ifndef PP_SOCKET_H
#define PP_SOCKET_H

#include "pingpong_common.h"

/* The listening (server) or connected (client) socket for o->addr; -1 after a message. */
int pp_socket_open(const char *tool, const struct pp_options *o);
/* Prints "ADDR tcp://HOST:PORT" of the listening socket, the line the harnesses read. */
int pp_socket_print_address(const char *tool, int listener);
/* The first client within timeout_ms, tuned as the listener; -1 after a message. */
int pp_socket_accept(const char *tool, int listener, int timeout_ms);

#endif /* PP_SOCKET_H */
