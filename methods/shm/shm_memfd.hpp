// SPDX-License-Identifier: LGPL-2.1-or-later
// Sealed memfds: the one kind of memory two shm processes share (a connection's segment,
// shared buffers). Sealed against shrinking and growing before it is passed on, so the
// process that maps it can never be hit by SIGBUS from the other resizing it.
#pragma once

#include <cstddef>

namespace bmi::method::shm {

// A new memfd of size bytes, sealed; the descriptor, or -BMI_E*.
int create_sealed_memfd(const char* name, std::size_t size);

// True if fd (from a peer) carries our seals and holds exactly size bytes.
bool sealed_memfd_of_size(int fd, std::size_t size);

}  // namespace bmi::method::shm
