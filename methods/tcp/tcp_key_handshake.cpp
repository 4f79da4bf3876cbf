// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake (methods/kit/key_handshake.hpp) in tcp's frames:
//   initiator -> HELLO       its nonce (feature_key_proof, feature_key_binding)
//   acceptor  -> HELLO_ACK   its nonce and its proof
//   initiator -> HELLO_PROOF its proof
// The acceptor creates no peer, so nothing from the connection can reach the application,
// until the initiator's proof checks.
#include "methods/tcp/tcp_key_features.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

using kit::Refusal;

Hello TcpMethod::hello_to_send(Connection& c) {
    Hello hello{hello_features() | feature_bits(keys_.offered()), own_address(c)};
    c.hello_features_sent = hello.features;
    if (c.key_handshake.keyed()) {
        hello.nonce = c.key_handshake.offer(keys_, c.fd, hello_address(hello.address));
        hello.ciphers = c.key_handshake.hello_ciphers();
        hello.public_key = c.key_handshake.hello_public_key();
    }
    return hello;
}

bool TcpMethod::on_keyed_hello(Connection& c, const Hello& hello) {
    if (!keys_.keyed()) return false;
    if (const Refusal why = c.key_handshake.check_hello(keys_, key_features(hello));
        why != Refusal::none) {
        refuse(c, why, c.reader.header.magic);
        return true;
    }
    const std::string ours = hello_address(own_address(c));
    const std::uint64_t ack_features = hello_features() | feature_bits(keys_.offered());
    // Our answer states our limit; the proofs bind both hellos when the hello stated its own.
    if (stated_unexpected_limit(hello.features) != 0)
        c.key_handshake.bind_terms(hello_terms(hello.features, ack_features));
    const auto step = c.key_handshake.answer(keys_, c.fd, hello.nonce, hello.address, ours,
                                             key_features(hello), hello.public_key);
    if (step.refused()) {
        refuse(c, step.refusal, c.reader.header.magic);
        return true;
    }
    Hello ack{ack_features, own_address(c)};
    ack.nonce = step.nonce;
    ack.proof = step.proof;
    ack.ciphers = step.cipher_choice;
    ack.public_key = step.public_key;
    if ((hello.features & feature_same_node) != 0) {
        // The offer rides on our proof, which tells the client it came from a key holder; its
        // ticket is useless without the key, which our shm listener asks for too.
        answer_same_node(c, std::move(ack));
        return true;
    }
    OutFrame reply;
    reply.body = encode_hello(ack, true, c.reader.header.magic);
    c.writer.control_queue.push_back(std::move(reply));
    c.state = ConnState::await_proof;
    flush(c);
    return true;
}

bool TcpMethod::on_keyed_ack(Connection& c, const Hello& ack) {
    const std::span<const std::uint8_t> proof =
        ack.proof ? std::span<const std::uint8_t>(*ack.proof) : std::span<const std::uint8_t>();
    // Our hello stated our limit (hello_to_send): both hellos are bound when the answer states
    // its own.
    if (stated_unexpected_limit(ack.features) != 0 &&
        stated_unexpected_limit(c.hello_features_sent) != 0)
        c.key_handshake.bind_terms(hello_terms(c.hello_features_sent, ack.features));
    const auto step = c.key_handshake.check_answer(keys_, key_features(ack), ack.nonce, ack.address,
                                                   proof, ack.public_key);
    if (step.refusal == Refusal::needs_our_key) c.peer->wants_key = true;
    if (step.refused()) {
        refuse(c, step.refusal);
        return false;
    }
    if (!keys_.keyed()) return true;
    if (c.key_handshake.cipher() != support::keys::Cipher::none) {
        // The proof is the last plain frame; the acceptor's records may follow its answer.
        start_records(c, encode_hello_proof(step.proof));
        return true;
    }
    log_plain(c);
    OutFrame out;
    out.body = encode_hello_proof(step.proof);
    c.writer.control_queue.push_back(std::move(out));
    return true;
}

void TcpMethod::start_records(Connection& c, std::span<const std::uint8_t> raw) {
    const std::optional<support::keys::TrafficKeys> keys = c.key_handshake.take_traffic_keys();
    c.records = std::make_unique<RecordLayer>(*keys, c.outbound, keys_.rekey_records());
    if (!raw.empty()) c.records->queue_raw(raw.data(), raw.size());
    BMI_LOG(tcp, "tcp: connection %llu with %s encrypted with %s (new key every %llu records)",
            static_cast<unsigned long long>(c.id), describe(c.remote).c_str(),
            support::keys::cipher_name(c.records->cipher()),
            static_cast<unsigned long long>(keys_.rekey_records()));
}

void TcpMethod::log_plain(const Connection& c) const {
    BMI_LOG(tcp, "tcp: connection %llu with %s not encrypted (%s)",
            static_cast<unsigned long long>(c.id), describe(c.remote).c_str(),
            keys_.encryption() == kit::Encryption::off ? "encryption is off here"
                                                       : "the peer offers or chose no cipher");
}

void TcpMethod::on_hello_proof(Connection& c) {
    // Only a keyed acceptor ever enters await_proof, the one state where this frame is legal.
    if (const Refusal why = c.key_handshake.check_proof(keys_, c.reader.scratch);
        why != Refusal::none) {
        refuse(c, why);
        return;
    }
    c.framing = Framing::v2;
    c.state = ConnState::established;
    if (c.key_handshake.cipher() != support::keys::Cipher::none)
        start_records(c);
    else
        log_plain(c);
    bind_peer(c, c.key_handshake.initiator_stated(), false, true);
    flush(c);
}

void TcpMethod::refuse(Connection& c, Refusal why, std::optional<std::uint32_t> tell_magic) {
    if (tell_magic && kit::tell_initiator(why)) {
        // Said before closing, so that a libbmi peer fails its operations with -BMI_EACCES
        // instead of taking us for an OrangeFS server.
        OutFrame reply;
        reply.body = encode_hello(Hello{our_features | feature_key_required, own_address(c)}, true,
                                  *tell_magic);
        c.writer.control_queue.push_back(std::move(reply));
        flush(c);
    }
    keys_.log_refusal(ip_text(c.remote), describe(c.remote), why);
    fail_connection(c, -BMI_EACCES, true);
}

}  // namespace bmi::method::tcp
