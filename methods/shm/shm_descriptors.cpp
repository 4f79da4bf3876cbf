// SPDX-License-Identifier: LGPL-2.1-or-later
// What the shm method does when its process runs out of file descriptors. A listener that
// cannot accept would spin (its epoll entry is level-triggered and the connection stays in the
// backlog), and a hello whose descriptors the kernel could not give us would read as a
// malformed one, blaming a well-behaved client. Instead the client is told why (a refusal
// reply with -BMI_EMFILE, which its operations see as -BMI_ECONNREFUSED) and the peers already
// served are untouched; the warning says which limit to raise.
#include <string>

#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

void ShmMethod::warn_out_of_descriptors(const char* what) {
    ++descriptor_refusals_;
    if (refusals_.should_log("out of descriptors"))
        BMI_WARN("shm: out of file descriptors: %s refused (%llu so far); each connected peer "
                 "holds two of ours (ulimit -n)",
                 what, static_cast<unsigned long long>(descriptor_refusals_));
}

bool ShmMethod::shed_connection() {
    warn_out_of_descriptors("a new connection");
    using Shed = support::AcceptReserve::Shed;
    const Shed shed =
        accept_reserve_.shed(listen_fd_, [](int fd) { send_refusal(fd, -BMI_EMFILE); });
    // No reserve (another thread of the process took the slot): stop watching the listener
    // until the next sweep, which looks again.
    if (shed == Shed::no_reserve) set_listener_interest(false);
    return shed == Shed::took_one;
}

void ShmMethod::resume_listener() {
    if (!listener_paused_) return;
    accept_reserve_.keep();
    set_listener_interest(true);
}

int ShmMethod::refuse_for_descriptors(Connection& conn) {
    send_refusal(conn.fd, -BMI_EMFILE);
    warn_out_of_descriptors(("the hello of pid " + std::to_string(conn.peer_pid)).c_str());
    return -BMI_EMFILE;
}

}  // namespace bmi::method::shm
