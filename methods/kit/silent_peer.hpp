// SPDX-License-Identifier: LGPL-2.1-or-later
// The kernel's bound on a silent peer of a TCP socket, for the methods whose connections have
// one (tcp's connections, verbs' bootstrap sockets): a node that is gone (its power, its cable,
// a partition) sends no FIN, and without this bound what waits on it would wait for ever.
#pragma once

#include <chrono>

namespace bmi::method::kit {

// TCP_USER_TIMEOUT `bound` for data or a connect nobody acknowledges, and keepalive for an
// idle connection (probes 1 s apart from 3 s before the bound), which the same bound ends.
// The socket then reports ETIMEDOUT. Failures are ignored: the options only fail faster.
void bound_silence(int fd, std::chrono::milliseconds bound);

}  // namespace bmi::method::kit
