// SPDX-License-Identifier: LGPL-2.1-or-later
// The security-key handshake (methods/kit/key_handshake.hpp) on the verbs bootstrap socket:
//   client -> HELLO      its nonce (feature_key_proof)
//   server -> HELLO      its nonce and its proof
//   client -> KeyProof   its proof, once the server's checked; its QP then goes to RTR/RTS
//   server -> ready byte once the client's proof checks; its QP then goes to RTR/RTS
// Until its proof checks, neither side's queue pair leaves INIT toward the other, so not one
// SEND or READ can cross, and the server creates no peer.
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
    std::snprintf(qp, sizeof qp, " qpn %u psn %u lid %u mtu %u unexp %u gid ", h.qp_num, h.psn,
                  static_cast<unsigned>(h.lid), static_cast<unsigned>(h.mtu), h.unexpected_limit);
    std::string text(h.name, std::min<std::size_t>(h.name_length, max_name));
    text += qp;
    for (std::uint8_t b : h.gid) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", b);
        text += hex;
    }
    return text;
}

namespace {

// A keyed peer without feature_key_ciphers proves a transcript without the cipher fields: it
// counts as one of an older handshake (Refusal::first_handshake), refused before any proof.
kit::KeyFeatures key_features(const Hello& h) {
    const std::uint32_t features = h.features;
    return {(features & feature_key_proof) != 0,
            (features & feature_key_binding) != 0 && (features & feature_key_ciphers) != 0,
            (features & feature_key_required) != 0, h.ciphers};
}

kit::PublicKey public_key_of(const Hello& h) {
    kit::PublicKey key;
    std::memcpy(key.data(), h.public_key, key.size());
    return key;
}

constexpr std::uint32_t keyed_features = feature_key_proof | feature_key_binding |
                                         feature_key_ciphers;

}  // namespace

void VerbsMethod::offer_key(Connection& c, Hello& hello) {
    if (!c.key_handshake.keyed()) return;
    hello.features |= keyed_features;
    const kit::Nonce& nonce = c.key_handshake.offer(keys_, c.fd, endpoint_text(hello));
    std::memcpy(hello.nonce, nonce.data(), key_field);
    hello.ciphers = c.key_handshake.hello_ciphers();
    if (hello.ciphers != 0)
        std::memcpy(hello.public_key, c.key_handshake.hello_public_key().data(), key_field);
}

void VerbsMethod::send_refusal(Connection& c) {
    // A HELLO that requires a key and proves none describes no queue pair (we made none): the
    // client fails its sends with -BMI_EACCES rather than a reset.
    Hello h;
    h.features = feature_key_required;
    // A fresh socket has room for it; if not, the client only sees the close.
    [[maybe_unused]] const ssize_t n = send(c.fd, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool VerbsMethod::check_keyed_hello(Connection& c, const Hello& remote) {
    const kit::Refusal why = c.key_handshake.check_hello(keys_, key_features(remote));
    if (why == kit::Refusal::none) return true;
    refuse(c, why, true);
    return false;
}

void VerbsMethod::answer_keyed_hello(Connection& c, const Hello& remote) {
    Hello h;
    fill_hello(c, h);
    h.features = keyed_features;
    const auto step = c.key_handshake.answer(keys_, c.fd, kit::nonce_from(remote.nonce),
                                             endpoint_text(remote), endpoint_text(h),
                                             key_features(remote), public_key_of(remote));
    if (step.refused()) {
        refuse(c, step.refusal, true);
        return;
    }
    c.remote_hello = remote;
    std::memcpy(h.nonce, step.nonce.data(), key_field);
    std::memcpy(h.proof, step.proof.data(), key_field);
    h.ciphers = step.cipher_choice;
    if (h.ciphers != 0) std::memcpy(h.public_key, step.public_key.data(), key_field);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&h);
    c.out.assign(bytes, bytes + sizeof h);
    c.state = Connection::State::awaiting_proof;
    flush_out(c);
}

std::optional<kit::Proof> VerbsMethod::check_answer(Connection& c, const Hello& remote) {
    const auto step =
        c.key_handshake.check_answer(keys_, key_features(remote), kit::nonce_from(remote.nonce),
                                     endpoint_text(remote), remote.proof, public_key_of(remote));
    if (step.refused()) {
        refuse(c, step.refusal);
        return std::nullopt;
    }
    if (c.key_handshake.keyed()) start_records(c);
    return step.proof;
}

void VerbsMethod::send_client_proof(Connection& c, const kit::Proof& proof) {
    KeyProof message;
    std::memcpy(message.proof, proof.data(), key_field);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&message);
    c.out.insert(c.out.end(), bytes, bytes + sizeof message);
    c.state = Connection::State::awaiting_go;
    flush_out(c);
}

void VerbsMethod::on_client_proof(Connection& c) {
    // Only a keyed server enters awaiting_proof, the one state where these bytes are legal.
    const std::span<const std::uint8_t> proof(c.in.data(), sizeof(KeyProof));
    if (const kit::Refusal why = c.key_handshake.check_proof(keys_, proof);
        why != kit::Refusal::none) {
        refuse(c, why);
        return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + sizeof(KeyProof));
    start_records(c);
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

void VerbsMethod::start_records(Connection& c) {
    if (c.key_handshake.cipher() == support::keys::Cipher::none) {
        BMI_LOG(verbs, "verbs: connection %llu not encrypted (%s)",
                static_cast<unsigned long long>(c.id),
                keys_.encryption() == kit::Encryption::off ? "encryption is off here"
                                                           : "the peer offers or chose no cipher");
        return;
    }
    const std::optional<support::keys::TrafficKeys> keys = c.key_handshake.take_traffic_keys();
    c.records = std::make_unique<VerbsRecords>(*keys, c.outbound, keys_.rekey_records());
    ++stats_.encrypted_connections;
    BMI_LOG(verbs, "verbs: connection %llu encrypted with %s (new key every %llu records)",
            static_cast<unsigned long long>(c.id), support::keys::cipher_name(c.records->cipher()),
            static_cast<unsigned long long>(keys_.rekey_records()));
}

void VerbsMethod::refuse(Connection& c, kit::Refusal why, bool answering) {
    if (answering && kit::tell_initiator(why)) send_refusal(c);
    const std::string& host = c.peer ? c.peer->host : std::string();
    keys_.log_refusal(host, c.peer ? describe_peer(*c.peer) : std::string("a peer"), why);
    fail_connection(c, -BMI_EACCES);
}

}  // namespace bmi::method::verbs
