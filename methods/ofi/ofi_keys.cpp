// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's side of the kit's key handshake: hello, answer and proof as the first
// messages between two endpoints, in the order the kit's state machine asks for.
#include "methods/kit/key_handshake.hpp"
#include "methods/kit/posted_recvs.hpp"
#include "methods/ofi/ofi_handshake.hpp"
#include "methods/ofi/ofi_method_impl.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

void OfiMethod::greet(OfiPeer& peer) {
    if (provider_.shm && !enter_new_region(peer)) {
        BMI_LOG(error, "bmi_ofi: %s: the address vector takes no new entry for its new region",
                peer.address.c_str());
        flush_waiting(peer, -BMI_ENOMEM);
        return;
    }
    kit::KeyHandshake& handshake =
        handshakes_.insert_or_assign(peer.fi_addr, kit::KeyHandshake(gate_)).first->second;
    Hello hello;
    hello.features = gate_.offered();
    hello.name = fabric_.name();
    hello.stated = listen_address_;
    hello.limits = buffer_limits();
    hello.numbers = true;
    if (handshake.keyed()) {
        hello.nonce = handshake.offer(
            gate_, peer.endpoint,
            proven_text(hello.stated, hello.limits, hello.numbers, fabric_.token()));
        hello.cipher_fields = true;
        hello.features.ciphers = handshake.hello_ciphers();
        hello.public_key = handshake.hello_public_key();
    }
    peer.state = OfiPeer::State::greeting;
    peer.token = 0;  // the answer's names the endpoint now at its address
    peer.records.reset();
    restart_flow(peer);
    timers_.schedule({peer.fi_addr, kit::DeadlineKind::setup},
                     kit::Deadlines::Clock::now() + limits_.setup);
    const auto body = encode(hello);
    send_control(peer, Kind::hello, 0, body.data(), body.size());
}

void OfiMethod::on_hello(Request& buffer) {
    auto hello = decode_hello({buffer.bytes.data(), buffer.length});
    if (!hello) return;
    std::string endpoint = address_of_name(hello->name);
    const fi_addr_t addr = enter_address(hello->name, endpoint);
    if (addr == FI_ADDR_NOTAVAIL) return;
    auto peer = peer_at(addr);
    if (!peer || peer_gone(*peer)) {
        // A departed peer back at its old address is a new peer to the application. What a
        // hello states of its sender is not taken as its name (doc/methods/ofi.md).
        peer = std::make_shared<OfiPeer>();
        peer->fi_addr = addr;
        peer->endpoint = std::move(endpoint);
        peer->address = peer->endpoint;
        peer->reached_us = true;
        peer->host = host_of_endpoint(peer->endpoint);
        peers_.insert_or_assign(addr, peer);
    }
    kit::KeyHandshake handshake(gate_);
    const kit::KeyFeatures features = checked_features(hello->features, hello->cipher_fields);
    if (auto why = handshake.check_hello(gate_, features); why != kit::Refusal::none) {
        refuse(peer, why);
        return;
    }
    Answer answer;
    answer.stated = listen_address_;
    answer.limits = buffer_limits();
    answer.numbers = true;
    // Each keyed hello holds an address-vector entry and a nonce until its proof comes.
    if (handshake.keyed() && peer->state == OfiPeer::State::fresh &&
        !unproven_.admission.holds(addr) && !admit_hello(*peer)) {
        drop_unproven(peer);
        return;
    }
    if (handshake.keyed()) {
        auto step = handshake.answer(
            gate_, own_endpoint_, hello->nonce,
            proven_text(hello->stated, hello->limits, hello->numbers, buffer.token),
            proven_text(answer.stated, answer.limits, answer.numbers, fabric_.token()), features,
            hello->public_key);
        if (step.refused()) {
            refuse(peer, step.refusal);
            return;
        }
        answer.features = gate_.offered();
        answer.nonce = step.nonce;
        answer.proof = step.proof;
        answer.cipher_fields = true;
        answer.features.ciphers = step.cipher_choice;
        answer.public_key = step.public_key;
    }
    restart_flow(*peer);
    peer->token = buffer.token;
    peer->order.set_peer_numbers(hello->numbers);
    note_limits(*peer, hello->limits);
    // What it sent before this hello was under the keys it now gives up.
    peer->records.reset();
    const auto body = encode(answer);
    send_control(*peer, Kind::answer, 0, body.data(), body.size());
    if (handshake.keyed()) {
        handshakes_.insert_or_assign(addr, std::move(handshake));
        peer->state = OfiPeer::State::answered;
        return;
    }
    sink_.register_peer(peer);
    peer->state = OfiPeer::State::ready;
    flush_waiting(*peer, 0);
    watch_silence(*peer);
}

void OfiMethod::on_answer(OfiPeer& peer, std::span<const std::byte> body) {
    auto it = handshakes_.find(peer.fi_addr);
    if (peer.state != OfiPeer::State::greeting || it == handshakes_.end()) return;
    auto answer = decode_answer(body);
    if (!answer) return;
    kit::KeyHandshake handshake = std::move(it->second);
    handshakes_.erase(it);
    timers_.cancel({peer.fi_addr, kit::DeadlineKind::setup});
    const std::span<const std::uint8_t> proof = answer->features.proof
                                                    ? std::span<const std::uint8_t>(answer->proof)
                                                    : std::span<const std::uint8_t>();
    auto step = handshake.check_answer(
        gate_, checked_features(answer->features, answer->cipher_fields), answer->nonce,
        proven_text(answer->stated, answer->limits, answer->numbers, peer.token), proof,
        answer->public_key);
    if (step.refused()) {
        gate_.log_refusal(peer.host, peer.address, step.refusal);
        // The next send greets again: a peer given the key since may take it.
        peer.state = OfiPeer::State::fresh;
        flush_waiting(peer, -BMI_EACCES);
        return;
    }
    // The proof first: the acceptor takes nothing else from us before it.
    if (handshake.keyed()) send_control(peer, Kind::proof, 0, step.proof.data(), step.proof.size());
    note_limits(peer, answer->limits);
    peer.order.set_peer_numbers(answer->numbers);
    start_records(peer, handshake, true);
    peer.state = OfiPeer::State::ready;
    flush_waiting(peer, 0);
    watch_silence(peer);
}

void OfiMethod::on_proof(OfiPeer& peer, std::span<const std::byte> body) {
    auto it = handshakes_.find(peer.fi_addr);
    if (peer.state != OfiPeer::State::answered || it == handshakes_.end()) return;
    kit::KeyHandshake handshake = std::move(it->second);
    handshakes_.erase(it);
    release_ticket(peer.fi_addr);
    const std::span<const std::uint8_t> proof(reinterpret_cast<const std::uint8_t*>(body.data()),
                                              body.size());
    if (auto why = handshake.check_proof(gate_, proof); why != kit::Refusal::none) {
        refuse(peer_at(peer.fi_addr), why);
        return;
    }
    start_records(peer, handshake, false);
    peer.state = OfiPeer::State::ready;
    sink_.register_peer(peer_at(peer.fi_addr));
    flush_waiting(peer, 0);
    watch_silence(peer);
}

void OfiMethod::refuse(const std::shared_ptr<OfiPeer>& peer, kit::Refusal why) {
    gate_.log_refusal(peer->host, peer->endpoint, why);
    if (kit::tell_initiator(why)) {
        Answer refusal;
        refusal.features.required = true;
        const auto body = encode(refusal);
        send_control(*peer, Kind::answer, 0, body.data(), body.size());
    }
    // Unproven, it holds nothing the application posted: it goes entirely.
    peer->state = OfiPeer::State::fresh;
    handshakes_.erase(peer->fi_addr);
    release_ticket(peer->fi_addr);
    if (peer->addr() == 0 && peer->posted_recvs.empty() && peer->waiting.empty())
        erase_peer(peer->fi_addr);
}

}  // namespace bmi::method::ofi
