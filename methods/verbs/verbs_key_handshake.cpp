// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake on the verbs bootstrap socket (doc/security.md):
//   client -> HELLO      its nonce (feature_key_proof)
//   server -> HELLO      its nonce and its proof
//   client -> KeyProof   its proof, once the server's checked; its QP then goes to RTR/RTS
//   server -> ready byte once the client's proof checks; its QP then goes to RTR/RTS
// Until its proof checks, neither side's queue pair leaves INIT toward the other, so not one
// SEND or READ can cross, and the server creates no peer. The proofs are support/keys' business.
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

#include "methods/verbs/verbs_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::verbs {

using support::keys::Role;

// What a HELLO says about its sender: its listen address and the queue pair the other side
// will connect to. Both go into the transcript (beside the bootstrap socket's endpoint, which
// each side takes from its own socket), so a proof also vouches for the queue pair a man in
// the middle could otherwise swap in the HELLO.
std::string endpoint_text(const Hello& h) {
    char qp[96];
    std::snprintf(qp, sizeof qp, " qpn %u psn %u lid %u mtu %u gid ", h.qp_num, h.psn,
                  static_cast<unsigned>(h.lid), static_cast<unsigned>(h.mtu));
    std::string text(h.name, std::min<std::size_t>(h.name_length, max_name));
    text += qp;
    for (std::uint8_t b : h.gid) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", b);
        text += hex;
    }
    return text;
}

support::keys::Transcript VerbsMethod::transcript(const Connection& c) const {
    return c.exchange.transcript(scheme());
}

void VerbsMethod::offer_key(Connection& c, Hello& hello) {
    if (!key_) return;
    c.our_nonce = nonces_in_flight_.claim();
    c.exchange.initiator_nonce = c.our_nonce.nonce();
    c.exchange.acceptor_endpoint = kit::acceptor_endpoint(c.fd, Role::initiator);
    hello.features |= feature_key_proof | feature_key_binding;
    std::memcpy(hello.nonce, c.exchange.initiator_nonce.data(), key_field);
    c.exchange.initiator_stated = endpoint_text(hello);
}

void VerbsMethod::send_refusal(Connection& c) {
    // A HELLO that requires a key and proves none describes no queue pair (we made none): the
    // client fails its sends with -BMI_EACCES rather than a reset.
    Hello h;
    h.features = feature_key_required;
    // A fresh socket has room for it; if not, the client only sees the close.
    [[maybe_unused]] const ssize_t n = send(c.fd, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool VerbsMethod::refuse_keyless(Connection& c) {
    if (!key_) return false;
    send_refusal(c);
    refuse(c, "it offers no key proof (a libbmi peer without the key)");
    return true;
}

void VerbsMethod::answer_keyed_hello(Connection& c, const Hello& remote) {
    if ((remote.features & feature_key_binding) == 0) {
        refuse(c, "it speaks the first key handshake, which this libbmi no longer accepts "
                  "(upgrade it)");
        return;
    }
    kit::KeyExchange& x = c.exchange;
    std::memcpy(x.initiator_nonce.data(), remote.nonce, key_field);
    if (nonces_in_flight_.ours(x.initiator_nonce)) {
        send_refusal(c);
        refuse(c, "it sent back the nonce of one of our own handshakes (a reflection)");
        return;
    }
    c.remote_hello = remote;
    x.initiator_stated = endpoint_text(remote);
    x.acceptor_endpoint = kit::acceptor_endpoint(c.fd, Role::acceptor);
    x.acceptor_nonce = support::keys::fresh_nonce();
    Hello h;
    fill_hello(c, h);
    h.features = feature_key_proof | feature_key_binding;
    std::memcpy(h.nonce, x.acceptor_nonce.data(), key_field);
    x.acceptor_stated = endpoint_text(h);
    const auto proof = support::keys::prove(*key_, Role::acceptor, transcript(c));
    std::memcpy(h.proof, proof.data(), key_field);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&h);
    c.out.assign(bytes, bytes + sizeof h);
    c.state = Connection::State::awaiting_proof;
    flush_out(c);
}

bool VerbsMethod::check_server_proof(Connection& c, const Hello& remote) {
    if ((remote.features & feature_key_proof) == 0) {
        refuse(c, "it gives no key proof (a libbmi server without a key)");
        return false;
    }
    if ((remote.features & feature_key_binding) == 0) {
        refuse(c, "it speaks the first key handshake, which this libbmi no longer accepts "
                  "(upgrade it)");
        return false;
    }
    std::memcpy(c.exchange.acceptor_nonce.data(), remote.nonce, key_field);
    c.exchange.acceptor_stated = endpoint_text(remote);
    if (!support::keys::verify(*key_, Role::acceptor, transcript(c), remote.proof)) {
        refuse(c, "its key proof is wrong (another key, or a proof made for another endpoint)");
        return false;
    }
    c.our_nonce.release();
    return true;
}

void VerbsMethod::send_client_proof(Connection& c) {
    KeyProof message;
    const auto proof = support::keys::prove(*key_, Role::initiator, transcript(c));
    std::memcpy(message.proof, proof.data(), key_field);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&message);
    c.out.insert(c.out.end(), bytes, bytes + sizeof message);
    c.state = Connection::State::awaiting_go;
    flush_out(c);
}

void VerbsMethod::on_client_proof(Connection& c) {
    // Only a keyed server enters awaiting_proof, the one state where these bytes are legal.
    const std::span<const std::uint8_t> proof(c.in.data(), sizeof(KeyProof));
    if (!support::keys::verify(*key_, Role::initiator, transcript(c), proof)) {
        refuse(c, "its key proof is wrong (another key, or a replayed or reflected handshake)");
        return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + sizeof(KeyProof));
    if (int rc = connect_qp(c, c.remote_hello); rc < 0) {
        fail_connection(c, rc);
        return;
    }
    // The proof stands for the client's ready byte; its first SEND still makes us ready.
    c.ready_seen = true;
    c.state = Connection::State::awaiting_ready;
    c.out.push_back(static_cast<std::uint8_t>(ready_byte));
    flush_out(c);
}

void VerbsMethod::on_go(Connection& c) {
    if (c.in.front() != ready_byte) {
        fail_connection(c, -BMI_EPROTO);
        return;
    }
    c.in.erase(c.in.begin());
    became_ready(c);
    // As without a key: the server counts us ready on our first SEND.
    queue_control(c, MsgType::credit, 0, FinStatus::ok);
}

void VerbsMethod::refuse(Connection& c, const char* why) {
    const std::string& host = c.peer ? c.peer->host : std::string();
    if (refusals_.should_log(host))
        BMI_WARN("verbs: refused %s: %s; connection closed (more refusals of this host are "
                 "counted for a minute, not logged; %llu refused so far)",
                 c.peer ? describe_peer(*c.peer).c_str() : "a peer", why,
                 static_cast<unsigned long long>(refusals_.refused()));
    fail_connection(c, -BMI_EACCES);
}

}  // namespace bmi::method::verbs
