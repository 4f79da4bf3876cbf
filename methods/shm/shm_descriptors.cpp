// SPDX-License-Identifier: LGPL-2.1-or-later
// What the shm method does when its process runs out of file descriptors. A listener that
// cannot accept would spin (its epoll entry is level-triggered and the connection stays in the
// backlog), and a hello whose descriptors the kernel could not give us would read as a
// malformed one, blaming a well-behaved client. Instead the client is told why (a refusal
// reply with -BMI_EMFILE, which its operations see as -BMI_ECONNREFUSED) and the peers already
// served are untouched; the warning (the kit's, for a socket the listener could not accept)
// says which limit to raise.
#include <sys/epoll.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_setup.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

void OutOfDescriptors::warn(const char* what) {
    ++refusals_;
    if (log_.should_log("out of descriptors"))
        BMI_WARN("shm: out of file descriptors: %s refused (%llu so far); each connected peer "
                 "holds two of ours (ulimit -n)",
                 what, static_cast<unsigned long long>(refusals_));
}

std::optional<std::string> ShmSetup::source_of(kit::AcceptedSocket& socket) {
    pid_t pid = 0;
    if (!peer_is_same_user(socket.fd, pid)) {
        BMI_LOG(error, "shm: refused a connection from another user (pid %d)",
                static_cast<int>(pid));
        return std::nullopt;
    }
    socket.peer_id = pid;
    return "pid " + std::to_string(pid);
}

void ShmSetup::close_for_room(std::uint64_t id) {
    if (Connection* conn = find(id)) host_.close_connection(*conn, -BMI_ECONNRESET);
}

void ShmSetup::offer_for_shedding(kit::SheddingChoice& choice) {
    for (auto& [id, owned] : connections_) {
        const Connection& conn = *owned;
        if (conn.initiator || conn.fd < 0) continue;
        const auto accepted_at = conn.setup_deadline - options_.setup_timeout;
        if (conn.state == ConnState::await_hello || conn.state == ConnState::await_proof) {
            choice.offer(id, accepted_at, true);
            continue;
        }
        const ShmPeer* peer = conn.peer.get();
        const bool unused = conn.state == ConnState::open && peer != nullptr && peer->addr() == 0 &&
                            peer->arrivals.empty() && peer->posted_recvs.empty() &&
                            conn.send_queue.empty() && conn.controls.empty() &&
                            conn.streams.empty() && conn.sends.empty() && conn.receives.empty() &&
                            conn.pulls.empty() && conn.splits.empty() && conn.pushes.empty() &&
                            !conn.rx.has_message();
        if (unused) choice.offer(id, accepted_at, false);
    }
}

void ShmSetup::answer_shed(int fd) {
    // The kit's acceptor has logged this refusal already (its reserve warning): one line per
    // event, so only the count is ours.
    descriptors_.count();
    send_refusal(fd, -BMI_EMFILE);
}

void ShmSetup::resume_listener() {
    if (!listener_paused_) return;
    acceptor_.keep_reserve();
    set_listener_interest(true);
}

int ShmSetup::refuse_for_descriptors(Connection& conn) {
    send_refusal(conn.fd, -BMI_EMFILE);
    descriptors_.warn(("the hello of pid " + std::to_string(conn.peer_pid)).c_str());
    return -BMI_EMFILE;
}

}  // namespace bmi::method::shm
