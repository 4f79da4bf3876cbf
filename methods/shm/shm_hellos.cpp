// SPDX-License-Identifier: LGPL-2.1-or-later
// The hellos (shm_hellos.hpp) and, in them, the security-key handshake
// (methods/kit/key_handshake.hpp) on the shm socket:
//   initiator -> Hello       its nonce (feature_key_proof, feature_key_binding), with the
//                            segment and its eventfd
//   acceptor  -> HelloReply  its nonce and its proof
//   initiator -> KeyProof    its proof
// Until the proof checks the acceptor creates no peer and reads no ring, and a keyed initiator
// writes nothing into its ring, so no message crosses toward an unproven side either way.
// What each side states is a listen name: the initiator's announced one, and for the acceptor
// the name the initiator dialled (its own, on its side).
#include "methods/shm/shm_hellos.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>

#include "methods/kit/same_node.hpp"
#include "methods/shm/shm_listener.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

using kit::Refusal;

namespace {

kit::KeyFeatures key_features(std::uint32_t features) {
    return {(features & feature_key_proof) != 0, (features & feature_key_binding) != 0, false};
}

}  // namespace

ShmHellos::ShmHellos(const Options& options)
    : slot_count_(options.slot_count),
      slot_size_(options.slot_size),
      unexpected_limit_(options.unexpected_limit) {
    std::random_device random;
    nonce_ =
        (static_cast<std::uint64_t>(random()) << 32) ^ random() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

int ShmHellos::send_hello(Connection& conn) {
    Hello hello{};
    hello.magic = hello_magic;
    hello.version = protocol_version;
    hello.slot_count = slot_count_;
    hello.slot_size = slot_size_;
    hello.pid = static_cast<std::int32_t>(getpid());
    hello.name_length = static_cast<std::uint32_t>(listen_name_.size());
    hello.nonce = nonce_;
    std::memcpy(hello.name, listen_name_.data(), listen_name_.size());
    hello.doorbell_index = static_cast<std::uint32_t>(conn.bell_index);
    hello.unexpected_limit = static_cast<std::uint64_t>(unexpected_limit_);
    if (conn.peer && conn.peer->route) {
        hello.features |= feature_same_node_ticket;
        std::memcpy(hello.ticket, conn.peer->route->offer().ticket.data(), key_bytes);
    }
    if (conn.key_handshake.keyed()) {
        const kit::Nonce& nonce = conn.key_handshake.offer(keys_, conn.fd, listen_name_);
        hello.features |= feature_key_proof | feature_key_binding;
        std::memcpy(hello.key_nonce, nonce.data(), key_bytes);
    }
    int fds[3] = {conn.segment.fd(), event_fd_, bell_fd_};
    long n = send_with_fds(conn.fd, &hello, sizeof hello, fds, 3);
    if (n != static_cast<long>(sizeof hello))
        return n < 0 ? support::bmi_error_from_errno(static_cast<int>(-n)) : -BMI_EPROTO;
    conn.segment.close_fd();  // the mapping stays; the peer now holds its own descriptor
    conn.state = ConnState::await_reply;
    return 0;
}

bool ShmHellos::send_reply(const Connection& conn) {
    HelloReply reply{};
    reply.magic = hello_magic;
    reply.version = protocol_version;
    reply.pid = static_cast<std::int32_t>(getpid());
    reply.doorbell_index = static_cast<std::uint32_t>(conn.bell_index);
    reply.nonce = nonce_;
    reply.unexpected_limit = static_cast<std::uint64_t>(unexpected_limit_);
    int own_fds[2] = {event_fd_, bell_fd_};
    return send_with_fds(conn.fd, &reply, sizeof reply, own_fds, 2) ==
           static_cast<long>(sizeof reply);
}

int ShmHellos::refuse(const Connection& conn, Refusal why, bool answering) {
    // Say why, so that a libbmi peer fails its sends with -BMI_EACCES.
    if (answering && kit::tell_initiator(why)) send_refusal(conn.fd, -BMI_EACCES);
    const std::string pid = "pid " + std::to_string(conn.peer_pid);
    keys_.log_refusal(pid, pid, why);
    return -BMI_EACCES;
}

int ShmHellos::check_hello(Connection& conn, const Hello& hello) {
    if (tickets_) {
        kit::Ticket shown{};
        std::memcpy(shown.data(), hello.ticket, key_bytes);
        if ((hello.features & feature_same_node_ticket) == 0 || !tickets_->admits(shown))
            return refuse(conn, Refusal::no_same_node_ticket, true);
    }
    const Refusal why = conn.key_handshake.check_hello(keys_, key_features(hello.features));
    return why == Refusal::none ? 0 : refuse(conn, why, true);
}

int ShmHellos::answer_keyed_hello(Connection& conn, const Hello& hello) {
    const auto step = conn.key_handshake.answer(keys_, conn.fd, kit::nonce_from(hello.key_nonce),
                                                std::string(hello.name, hello.name_length),
                                                listen_name_);
    if (step.refused()) return refuse(conn, step.refusal, true);
    conn.hello_received = hello;
    HelloReply reply{};
    reply.magic = hello_magic;
    reply.version = protocol_version;
    reply.pid = static_cast<std::int32_t>(getpid());
    reply.features = feature_key_proof | feature_key_binding;
    reply.nonce = nonce_;
    std::memcpy(reply.key_nonce, step.nonce.data(), key_bytes);
    std::memcpy(reply.key_proof, step.proof.data(), key_bytes);
    reply.doorbell_index = static_cast<std::uint32_t>(conn.bell_index);
    reply.unexpected_limit = static_cast<std::uint64_t>(unexpected_limit_);
    const int own_fds[2] = {event_fd_, bell_fd_};
    const long n = send_with_fds(conn.fd, &reply, sizeof reply, own_fds, 2);
    if (n != static_cast<long>(sizeof reply)) return -BMI_ECONNRESET;
    conn.state = ConnState::await_proof;
    return 0;
}

int ShmHellos::check_reply(Connection& conn, const HelloReply& reply) {
    // A ticket's holder talks only to the instance that handed it out: a listener that took
    // the name meanwhile is not the server the tcp lookup asked.
    if (conn.peer && conn.peer->route && reply.status == 0 &&
        reply.nonce != conn.peer->route->offer().listener_nonce) {
        BMI_LOG(error, "shm: shm://%s is not the instance whose same-node offer we hold",
                conn.peer->name.c_str());
        return -BMI_EACCES;
    }
    // A same-node listener refuses whoever shows no ticket, key or not: say that, not that
    // a key is missing.
    if (reply.status == -BMI_EACCES && conn.peer && !conn.peer->route &&
        kit::names_same_node_listener(conn.peer->name))
        return refuse(conn, Refusal::holds_no_ticket);
    kit::KeyFeatures features = key_features(reply.features);
    features.required = reply.status == -BMI_EACCES;
    const auto step = conn.key_handshake.check_answer(
        keys_, features, kit::nonce_from(reply.key_nonce), conn.peer->name, reply.key_proof);
    if (step.refused()) return refuse(conn, step.refusal);
    if (!conn.key_handshake.keyed()) return 0;
    KeyProof message{};
    message.magic = hello_magic;
    message.version = protocol_version;
    std::memcpy(message.proof, step.proof.data(), key_bytes);
    const long n = send_with_fds(conn.fd, &message, sizeof message, nullptr, 0);
    return n == static_cast<long>(sizeof message) ? 0 : -BMI_ECONNRESET;
}

int ShmHellos::receive_proof(Connection& conn) {
    KeyProof message{};
    int fds[1] = {-1};
    int fd_count = 0;
    const long n = receive_with_fds(conn.fd, &message, sizeof message, fds, 1, fd_count);
    if (n == -EAGAIN) return 0;
    if (fd_count > 0) close(fds[0]);
    if (n == 0) return -BMI_ECONNRESET;
    // The proof comes whole in one message; anything else is not a proof.
    if (n != static_cast<long>(sizeof message) || fd_count != 0 || message.magic != hello_magic ||
        message.version != protocol_version)
        return refuse(conn, Refusal::malformed_proof);
    if (const Refusal why = conn.key_handshake.check_proof(keys_, message.proof);
        why != Refusal::none)
        return refuse(conn, why);
    return 1;
}

}  // namespace bmi::method::shm
