// SPDX-License-Identifier: LGPL-2.1-or-later
// Socket options of the methods whose connections have a TCP socket (tcp's connections, verbs'
// bootstrap sockets), written once so that both give a peer the same rules.
#pragma once

#include <chrono>

namespace bmi::method::kit {

// One integer option. Failures are ignored: every caller's option is an optimisation or a
// faster failure, never something the connection needs to work.
void set_socket_int(int fd, int level, int name, int value);

// The kernel's bound on a silent peer: a node that is gone (its power, its cable, a partition)
// sends no FIN, and without this what waits on it would wait for ever. TCP_USER_TIMEOUT
// `bound` for data or a connect nobody acknowledges, and keepalive for an idle connection
// (probes 1 s apart from 3 s before the bound), which the same bound ends; the socket then
// reports ETIMEDOUT.
void bound_silence(int fd, std::chrono::milliseconds bound);

}  // namespace bmi::method::kit
