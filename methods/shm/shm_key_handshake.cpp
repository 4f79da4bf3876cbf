// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake on the shm socket (doc/security.md):
//   initiator -> Hello       its nonce (feature_key_proof, feature_key_binding), with the
//                            segment and its eventfd
//   acceptor  -> HelloReply  its nonce and its proof
//   initiator -> KeyProof    its proof
// Until the proof checks the acceptor creates no peer and reads no ring, and a keyed initiator
// writes nothing into its ring, so no message crosses toward an unproven side either way.
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "methods/shm/shm_listener.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/keys/key_proof.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

using support::keys::Role;

support::keys::Transcript ShmMethod::transcript(const Connection& conn) const {
    return conn.exchange.transcript(scheme());
}

int ShmMethod::refuse(const Connection& conn, const char* why) {
    if (refusals_.should_log("pid " + std::to_string(conn.peer_pid)))
        BMI_WARN("shm: refused pid %d: %s; connection closed (more refusals of it are counted "
                 "for a minute, not logged; %llu refused so far)",
                 static_cast<int>(conn.peer_pid), why,
                 static_cast<unsigned long long>(refusals_.refused()));
    return -BMI_EACCES;
}

void ShmMethod::offer_key(Connection& conn, Hello& hello) {
    if (!key_) return;
    conn.keyed = true;
    conn.our_nonce = nonces_in_flight_.claim();
    conn.exchange.initiator_nonce = conn.our_nonce.nonce();
    conn.exchange.acceptor_endpoint = kit::acceptor_endpoint(conn.fd, Role::initiator);
    conn.exchange.acceptor_stated = conn.peer->name;
    conn.exchange.initiator_stated = listen_name_;
    hello.features |= feature_key_proof | feature_key_binding;
    std::memcpy(hello.key_nonce, conn.exchange.initiator_nonce.data(), key_bytes);
}

int ShmMethod::refuse_keyless(Connection& conn) {
    // Say why, so that a keyless libbmi peer fails its sends with -BMI_EACCES.
    send_refusal(conn.fd, -BMI_EACCES);
    return refuse(conn, "it offers no key proof (a libbmi peer without the key)");
}

int ShmMethod::answer_keyed_hello(Connection& conn, const Hello& hello) {
    conn.keyed = true;
    if ((hello.features & feature_key_binding) == 0)
        return refuse(conn, "it speaks the first key handshake, which this libbmi no longer "
                            "accepts (upgrade it)");
    kit::KeyExchange& x = conn.exchange;
    std::memcpy(x.initiator_nonce.data(), hello.key_nonce, key_bytes);
    if (nonces_in_flight_.ours(x.initiator_nonce))
        return refuse(conn, "it sent back the nonce of one of our own handshakes (a reflection)");
    conn.hello_received = hello;
    x.acceptor_nonce = support::keys::fresh_nonce();
    x.acceptor_endpoint = kit::acceptor_endpoint(conn.fd, Role::acceptor);
    x.acceptor_stated = listen_name_;
    x.initiator_stated.assign(hello.name, hello.name_length);
    HelloReply reply{};
    reply.magic = hello_magic;
    reply.version = protocol_version;
    reply.pid = static_cast<std::int32_t>(getpid());
    reply.features = feature_key_proof | feature_key_binding;
    std::memcpy(reply.key_nonce, x.acceptor_nonce.data(), key_bytes);
    const auto proof = support::keys::prove(*key_, Role::acceptor, transcript(conn));
    std::memcpy(reply.key_proof, proof.data(), key_bytes);
    reply.doorbell_index = static_cast<std::uint32_t>(conn.bell_index);
    const int own_fds[2] = {event_fd_, bell_.fd()};
    const long n = send_with_fds(conn.fd, &reply, sizeof reply, own_fds, 2);
    if (n != static_cast<long>(sizeof reply)) return -BMI_ECONNRESET;
    conn.state = ConnState::await_proof;
    return 0;
}

int ShmMethod::check_keyed_reply(Connection& conn, const HelloReply& reply) {
    if (!key_) return 0;
    if ((reply.features & feature_key_proof) == 0)
        return refuse(conn, "it gives no key proof (a libbmi peer without a key)");
    if ((reply.features & feature_key_binding) == 0)
        return refuse(conn, "it speaks the first key handshake, which this libbmi no longer "
                            "accepts (upgrade it)");
    std::memcpy(conn.exchange.acceptor_nonce.data(), reply.key_nonce, key_bytes);
    const support::keys::Transcript t = transcript(conn);
    if (!support::keys::verify(*key_, Role::acceptor, t, reply.key_proof))
        return refuse(conn, "its key proof is wrong (another key, or a proof made for another "
                            "endpoint)");
    conn.our_nonce.release();
    KeyProof message{};
    message.magic = hello_magic;
    message.version = protocol_version;
    const auto proof = support::keys::prove(*key_, Role::initiator, t);
    std::memcpy(message.proof, proof.data(), key_bytes);
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
        return refuse(conn, "malformed key proof");
    if (!support::keys::verify(*key_, Role::initiator, transcript(conn), message.proof))
        return refuse(conn, "its key proof is wrong (another key, or a replayed or reflected "
                            "handshake)");
    conn.peer = peer_for_hello(conn.hello_received, conn.peer_pid);
    if (conn.peer->connection == 0 || find_connection(conn.peer->connection) == nullptr)
        conn.peer->connection = conn.id;
    mark_open(conn);
    mark_busy(conn);  // the initiator may have filled its ring already, and rung for nothing
    wake_self();
    BMI_LOG(shm, "accepted connection %llu from %s (pid %d), key proven",
            static_cast<unsigned long long>(conn.id), describe_peer(*conn.peer).c_str(),
            static_cast<int>(conn.peer_pid));
    return 0;
}

}  // namespace bmi::method::shm
