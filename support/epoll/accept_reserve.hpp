// SPDX-License-Identifier: LGPL-2.1-or-later
// Accepting when the descriptor table is full. A listener in a level-triggered epoll set is
// reported again and again while accept() fails with EMFILE or ENFILE, so progress would spin
// and the client would wait for an answer that never comes. One descriptor held in reserve is
// given up for a moment to take that connection, answer it if the protocol can say why, and
// close it; then it is held again. Every method that listens keeps one (tcp, shm, the verbs
// bootstrap), opened when it starts listening, while descriptors are surely free.
#pragma once

#include <functional>

namespace bmi::support {

class AcceptReserve {
public:
    AcceptReserve() = default;
    ~AcceptReserve();
    AcceptReserve(const AcceptReserve&) = delete;
    AcceptReserve& operator=(const AcceptReserve&) = delete;

    // Holds the reserve descriptor unless it is held already (or the table is full now).
    void keep();
    bool held() const { return fd_ >= 0; }

    enum class Shed {
        took_one,      // a waiting connection was accepted, answered and closed
        none_waiting,  // nobody waits any more: the listener is quiet again
        no_reserve,    // nothing held (another thread took the slot): the caller must stop
                       // watching the listener until a descriptor is free again
    };
    // Call after accept() on listen_fd failed with EMFILE or ENFILE. `answer`, when given,
    // may write to the accepted socket (blocking, close-on-exec) before it is closed.
    Shed shed(int listen_fd, const std::function<void(int)>& answer = {});

    // Counts one more connection shed; true for the first and every 1,024th after it, when a
    // flood of them deserves one more line of the log.
    bool count_shed() { return sheds_++ % 1024 == 0; }
    unsigned long long sheds() const { return sheds_; }

private:
    int fd_ = -1;
    unsigned long long sheds_ = 0;
};

}  // namespace bmi::support
