// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake on top of HELLO/HELLO_ACK (doc/security.md):
//   initiator -> HELLO       its nonce (feature_key_proof, feature_key_binding)
//   acceptor  -> HELLO_ACK   its nonce and its proof
//   initiator -> HELLO_PROOF its proof
// The acceptor creates no peer, so nothing from the connection can reach the application,
// until the initiator's proof checks. What the proofs bind is the kit's business
// (methods/kit/key_exchange.hpp), the proofs themselves support/keys'.
#include "methods/tcp/tcp_method_impl.hpp"
#include "support/keys/key_proof.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

using support::keys::Role;

support::keys::Transcript TcpMethod::transcript(const Connection& c) const {
    return c.exchange.transcript(scheme());
}

Hello TcpMethod::hello_to_send(Connection& c) {
    Hello hello{our_features, own_address(c)};
    if (!key_) return hello;
    c.keyed = true;
    c.our_nonce = nonces_in_flight_.claim();
    c.exchange.initiator_nonce = c.our_nonce.nonce();
    c.exchange.acceptor_endpoint = kit::acceptor_endpoint(c.fd, Role::initiator);
    c.exchange.initiator_stated = hello_address(own_address(c));
    hello.features |= feature_key_proof | feature_key_binding;
    hello.nonce = c.exchange.initiator_nonce;
    return hello;
}

bool TcpMethod::on_keyed_hello(Connection& c, const Hello& hello) {
    if (!key_) return false;
    if ((hello.features & feature_key_proof) == 0) {
        say_key_required(c, c.reader.header.magic);
        return true;
    }
    if ((hello.features & feature_key_binding) == 0) {
        refuse(c, "it speaks the first key handshake, which this libbmi no longer accepts "
                  "(upgrade it)");
        return true;
    }
    if (nonces_in_flight_.ours(hello.nonce)) {
        refuse(c, "it sent back the nonce of one of our own handshakes (a reflection)");
        return true;
    }
    c.exchange.initiator_nonce = hello.nonce;
    c.exchange.acceptor_nonce = support::keys::fresh_nonce();
    c.exchange.acceptor_endpoint = kit::acceptor_endpoint(c.fd, Role::acceptor);
    c.exchange.initiator_stated = hello.address;
    c.exchange.acceptor_stated = hello_address(own_address(c));
    OutFrame reply;
    Hello ack{our_features | feature_key_proof | feature_key_binding, own_address(c)};
    ack.nonce = c.exchange.acceptor_nonce;
    ack.proof = support::keys::prove(*key_, Role::acceptor, transcript(c));
    reply.body = encode_hello(ack, true, c.reader.header.magic);
    c.writer.control_queue.push_back(std::move(reply));
    c.state = ConnState::await_proof;
    flush(c);
    return true;
}

void TcpMethod::say_key_required(Connection& c, std::uint32_t magic) {
    // Said before closing, so that a libbmi peer without a key fails its operations with
    // -BMI_EACCES instead of taking us for an OrangeFS server.
    OutFrame reply;
    reply.body =
        encode_hello(Hello{our_features | feature_key_required, own_address(c)}, true, magic);
    c.writer.control_queue.push_back(std::move(reply));
    flush(c);
    refuse(c, "it offers no key proof (a libbmi peer without the key)");
}

bool TcpMethod::on_keyed_ack(Connection& c, const Hello& ack) {
    if (!key_) {
        if ((ack.features & feature_key_required) == 0) return true;
        c.peer->wants_key = true;
        refuse(c, "it admits only peers with its security key, and we have none");
        return false;
    }
    if ((ack.features & feature_key_proof) == 0 || !ack.proof) {
        refuse(c, "it gives no key proof (a libbmi server without a key)");
        return false;
    }
    if ((ack.features & feature_key_binding) == 0) {
        refuse(c, "it speaks the first key handshake, which this libbmi no longer accepts "
                  "(upgrade it)");
        return false;
    }
    c.exchange.acceptor_nonce = ack.nonce;
    c.exchange.acceptor_stated = ack.address;
    const support::keys::Transcript t = transcript(c);
    if (!support::keys::verify(*key_, Role::acceptor, t, *ack.proof)) {
        refuse(c, "its key proof is wrong (another key, or a proof made for another endpoint)");
        return false;
    }
    c.our_nonce.release();
    OutFrame proof;
    proof.body = encode_hello_proof(support::keys::prove(*key_, Role::initiator, t));
    c.writer.control_queue.push_back(std::move(proof));
    return true;
}

void TcpMethod::on_hello_proof(Connection& c) {
    // Only a keyed acceptor ever enters await_proof, the one state where this frame is legal.
    if (!support::keys::verify(*key_, Role::initiator, transcript(c), c.reader.scratch)) {
        refuse(c, "its key proof is wrong (another key, or a replayed or reflected handshake)");
        return;
    }
    c.framing = Framing::v2;
    c.state = ConnState::established;
    bind_peer(c, c.exchange.initiator_stated, false, true);
    flush(c);
}

void TcpMethod::refuse(Connection& c, const char* why) {
    if (refusals_.should_log(ip_text(c.remote)))
        BMI_WARN("tcp: refused %s: %s; connection closed (more refusals of this host are counted "
                 "for a minute, not logged; %llu refused so far)",
                 describe(c.remote).c_str(), why,
                 static_cast<unsigned long long>(refusals_.refused()));
    fail_connection(c, -BMI_EACCES, true);
}

}  // namespace bmi::method::tcp
