// SPDX-License-Identifier: LGPL-2.1-or-later
// The descriptor a peer hands over to be woken through (its "notifier").
//
// We write to it whenever the peer sleeps on a ring we fill, so what it is decides what a
// write can do to us: a pipe whose reader is gone raises SIGPIPE in our host process, a full
// blocking pipe hangs it. An eventfd in nonblocking mode can do neither. So a peer's notifier
// is accepted only if it is an eventfd, and it is made nonblocking on adoption.
#pragma once

namespace bmi::method::shm {

// 0 if fd is an eventfd (now nonblocking), or -BMI_EPROTO, logging what it was instead and
// the pid that sent it. fd stays open either way; the caller closes it.
int adopt_notifier(int fd, int peer_pid);

}  // namespace bmi::method::shm
