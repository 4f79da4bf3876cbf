// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake (methods/kit/key_handshake.hpp) on the shm socket:
//   initiator -> Hello       its nonce (feature_key_proof, feature_key_binding), with the
//                            segment and its eventfd
//   acceptor  -> HelloReply  its nonce and its proof
//   initiator -> KeyProof    its proof
// Until the proof checks the acceptor creates no peer and reads no ring, and a keyed initiator
// writes nothing into its ring, so no message crosses toward an unproven side either way.
// What each side states is a listen name: the initiator's announced one, and for the acceptor
// the name the initiator dialled (its own, on its side).
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

using kit::Refusal;

namespace {

kit::KeyFeatures key_features(std::uint32_t features) {
    return {(features & feature_key_proof) != 0, (features & feature_key_binding) != 0, false};
}

}  // namespace

int ShmMethod::refuse(const Connection& conn, Refusal why, bool answering) {
    // Say why, so that a libbmi peer fails its sends with -BMI_EACCES.
    if (answering && kit::tell_initiator(why)) send_refusal(conn.fd, -BMI_EACCES);
    const std::string pid = "pid " + std::to_string(conn.peer_pid);
    keys_.log_refusal(pid, pid, why);
    return -BMI_EACCES;
}

void ShmMethod::offer_key(Connection& conn, Hello& hello) {
    if (!conn.key_handshake.keyed()) return;
    const kit::Nonce& nonce = conn.key_handshake.offer(keys_, conn.fd, listen_name_);
    hello.features |= feature_key_proof | feature_key_binding;
    std::memcpy(hello.key_nonce, nonce.data(), key_bytes);
}

int ShmMethod::check_keyed_hello(Connection& conn, const Hello& hello) {
    const Refusal why = conn.key_handshake.check_hello(keys_, key_features(hello.features));
    return why == Refusal::none ? 0 : refuse(conn, why, true);
}

int ShmMethod::answer_keyed_hello(Connection& conn, const Hello& hello) {
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
    std::memcpy(reply.key_nonce, step.nonce.data(), key_bytes);
    std::memcpy(reply.key_proof, step.proof.data(), key_bytes);
    reply.doorbell_index = static_cast<std::uint32_t>(conn.bell_index);
    const int own_fds[2] = {event_fd_, visits_.bell_fd()};
    const long n = send_with_fds(conn.fd, &reply, sizeof reply, own_fds, 2);
    if (n != static_cast<long>(sizeof reply)) return -BMI_ECONNRESET;
    conn.state = ConnState::await_proof;
    return 0;
}

int ShmMethod::check_keyed_reply(Connection& conn, const HelloReply& reply) {
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

int ShmMethod::receive_key_proof(Connection& conn) {
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
    conn.peer = peer_for_hello(conn.hello_received, conn.peer_pid);
    if (conn.peer->connection == 0 || find_connection(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    mark_open(conn);
    visits_.mark_busy(
        conn);  // the initiator may have filled its ring already, and rung for nothing
    wake_self();
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d), key proven",
            static_cast<unsigned long long>(conn.id), describe_peer(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

}  // namespace bmi::method::shm
