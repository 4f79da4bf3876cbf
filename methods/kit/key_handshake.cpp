// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/kit/key_handshake.hpp"

#include <sodium.h>

#include <bit>

#include "bmi-types.h"
#include "support/keys/key_proof.hpp"
#include "support/logging/log.hpp"
#include "support/settings/settings.hpp"

namespace bmi::method::kit {

using support::keys::Role;

std::string_view reason(Refusal why) {
    switch (why) {
        case Refusal::none:
            return "not refused";
        case Refusal::offers_no_proof:
            return "it offers no key proof (a libbmi peer without the key)";
        case Refusal::gives_no_proof:
            return "it gives no key proof (a libbmi peer without a key)";
        case Refusal::first_handshake:
            return "it speaks an older key handshake, which this libbmi no longer accepts "
                   "(upgrade it)";
        case Refusal::reflected_nonce:
            return "it sent back the nonce of one of our own handshakes (a reflection)";
        case Refusal::wrong_acceptor_proof:
            return "its key proof is wrong (another key, or a proof made for another endpoint)";
        case Refusal::wrong_initiator_proof:
            return "its key proof is wrong (another key, or a replayed or reflected handshake)";
        case Refusal::malformed_proof:
            return "malformed key proof";
        case Refusal::needs_our_key:
            return "it admits only peers with its security key, and we have none";
        case Refusal::refused_by_peer:
            return "it refused our handshake (its log says why)";
        case Refusal::legacy_framing:
            return "legacy framing (BMI_TCP_LEGACY) cannot prove the security key";
        case Refusal::legacy_first_frame:
            return "its first frame is not a hello (a legacy OrangeFS peer cannot prove the key)";
        case Refusal::closed_before_proof:
            return "it closed before proving the key (a legacy OrangeFS server, or a server "
                   "that refused our proof)";
        case Refusal::needs_encryption:
            return "encryption is required and it offers or chose no cipher we run";
        case Refusal::bad_cipher_choice:
            return "it chose a cipher we did not offer";
        case Refusal::bad_public_key:
            return "its ephemeral key yields no shared secret";
        case Refusal::no_same_node_ticket:
            return "it shows no ticket of ours to a same-node listener (none, or a forgotten one)";
        case Refusal::holds_no_ticket:
            return "it is a same-node listener, which admits only the tickets its server's tcp "
                   "side hands out (look the server up by its tcp address), and we hold none";
    }
    return "unknown refusal";
}

bool tell_initiator(Refusal why) {
    return why == Refusal::offers_no_proof || why == Refusal::first_handshake ||
           why == Refusal::reflected_nonce || why == Refusal::needs_encryption ||
           why == Refusal::no_same_node_ticket;
}

int KeyGate::load_encryption(const support::Settings& settings) {
    // The settings' choices follow Encryption's order.
    const auto policy = static_cast<Encryption>(settings.number(support::SettingId::encryption));
    if (policy != Encryption::off && !keyed()) {
        BMI_WARN("%s: encryption=%s needs a security key (key_file); none is given",
                 method_.c_str(), settings.shown(support::SettingId::encryption).c_str());
        return -BMI_EINVAL;
    }
    encryption_ = policy;
    rekey_records_ =
        static_cast<std::uint64_t>(settings.number(support::SettingId::encryption_rekey_records));
    return 0;
}

void KeyGate::log_refusal(const std::string& source, std::string_view who, Refusal why) {
    if (!log_.should_log(source)) return;
    const std::string_view text = reason(why);
    BMI_WARN("%s: refused %.*s: %.*s; connection closed (more refusals of %s are counted for a "
             "minute, not logged; %llu refused so far)",
             method_.c_str(), static_cast<int>(who.size()), who.data(),
             static_cast<int>(text.size()), text.data(), source.c_str(),
             static_cast<unsigned long long>(log_.refused()));
}

KeyHandshake::~KeyHandshake() { sodium_memzero(shared_.data(), shared_.size()); }

const Nonce& KeyHandshake::offer(KeyGate& gate, int fd, std::string our_stated) {
    return offer(gate, acceptor_endpoint(fd, Role::initiator), std::move(our_stated));
}

const Nonce& KeyHandshake::offer(KeyGate& gate, std::string acceptor_endpoint,
                                 std::string our_stated) {
    if (const std::uint8_t ciphers = gate.cipher_offer(); ciphers != 0) {
        ephemeral_ = std::make_unique<support::keys::EphemeralKey>();
        exchange_.initiator_public = ephemeral_->public_key();
        exchange_.cipher_offer = ciphers;
    }
    claim_ = gate.nonces_.claim();
    exchange_.initiator_nonce = claim_.nonce();
    exchange_.acceptor_endpoint = std::move(acceptor_endpoint);
    exchange_.initiator_stated = std::move(our_stated);
    stage_ = Stage::offered;
    return exchange_.initiator_nonce;
}

KeyHandshake::Step KeyHandshake::check_answer(KeyGate& gate, KeyFeatures features,
                                              const Nonce& nonce, std::string acceptor_stated,
                                              std::span<const std::uint8_t> proof,
                                              const PublicKey& public_key) {
    Step step;
    if (!gate.keyed()) {
        if (features.required) step.refusal = Refusal::needs_our_key;
        return step;
    }
    if (stage_ != Stage::offered) {
        step.refusal = Refusal::wrong_acceptor_proof;
    } else if (features.required && !features.proof) {
        step.refusal = Refusal::refused_by_peer;
    } else if (!features.proof || proof.empty()) {
        step.refusal = Refusal::gives_no_proof;
    } else if (!features.binding) {
        step.refusal = Refusal::first_handshake;
    }
    if (step.refused()) return step;
    // The choice is one cipher we offered, or none; none is refused only where we require one.
    const std::uint8_t choice = features.ciphers;
    if ((choice & ~exchange_.cipher_offer) != 0 || std::popcount(choice) > 1) {
        step.refusal = Refusal::bad_cipher_choice;
        return step;
    }
    if (choice == 0 && gate.encryption() == Encryption::require) {
        step.refusal = Refusal::needs_encryption;
        return step;
    }
    exchange_.acceptor_nonce = nonce;
    exchange_.acceptor_stated = std::move(acceptor_stated);
    exchange_.cipher_choice = choice;
    if (choice != 0) exchange_.acceptor_public = public_key;
    const support::keys::Transcript t = exchange_.transcript(gate.method_);
    // The proof first: only then is the acceptor's key known to be the acceptor's.
    if (!support::keys::verify(*gate.key_, Role::acceptor, t, proof)) {
        step.refusal = Refusal::wrong_acceptor_proof;
        return step;
    }
    if (choice != 0 && !ephemeral_->agree(public_key, shared_)) {
        step.refusal = Refusal::bad_public_key;
        return step;
    }
    claim_.release();
    stage_ = Stage::proven;
    std::copy(proof.begin(), proof.end(), acceptor_proof_.begin());
    step.proof = support::keys::prove(*gate.key_, Role::initiator, t);
    if (choice != 0) derive(gate, step.proof);
    return step;
}

Refusal KeyHandshake::check_hello(const KeyGate& gate, KeyFeatures features) const {
    if (!gate.keyed()) return Refusal::none;
    if (!features.proof) return Refusal::offers_no_proof;
    if (!features.binding) return Refusal::first_handshake;
    return Refusal::none;
}

KeyHandshake::Step KeyHandshake::answer(KeyGate& gate, int fd, const Nonce& initiator_nonce,
                                        std::string initiator_stated, std::string our_stated,
                                        KeyFeatures offer, const PublicKey& public_key) {
    return answer(gate, acceptor_endpoint(fd, Role::acceptor), initiator_nonce,
                  std::move(initiator_stated), std::move(our_stated), offer, public_key);
}

KeyHandshake::Step KeyHandshake::answer(KeyGate& gate, std::string our_endpoint,
                                        const Nonce& initiator_nonce, std::string initiator_stated,
                                        std::string our_stated, KeyFeatures offer,
                                        const PublicKey& public_key) {
    Step step;
    if (!gate.keyed() || stage_ != Stage::unproven) {
        step.refusal = Refusal::wrong_initiator_proof;
        return step;
    }
    if (gate.nonces_.ours(initiator_nonce)) {
        step.refusal = Refusal::reflected_nonce;
        return step;
    }
    exchange_.initiator_nonce = initiator_nonce;
    exchange_.acceptor_nonce = support::keys::fresh_nonce();
    exchange_.acceptor_endpoint = std::move(our_endpoint);
    exchange_.initiator_stated = std::move(initiator_stated);
    exchange_.acceptor_stated = std::move(our_stated);
    // What the hello offered is bound whether or not we take it up: the initiator's proof
    // covers what it sent.
    exchange_.cipher_offer = offer.ciphers;
    if (offer.ciphers != 0) exchange_.initiator_public = public_key;
    const support::keys::Cipher cipher =
        support::keys::choose_cipher(offer.ciphers, gate.cipher_offer());
    if (cipher == support::keys::Cipher::none && gate.encryption() == Encryption::require) {
        step.refusal = Refusal::needs_encryption;
        return step;
    }
    if (cipher != support::keys::Cipher::none) {
        // The initiator's key is checked by its proof later; a key no secret comes from is
        // refused now, before we answer.
        ephemeral_ = std::make_unique<support::keys::EphemeralKey>();
        if (!ephemeral_->agree(public_key, shared_)) {
            step.refusal = Refusal::bad_public_key;
            return step;
        }
        exchange_.acceptor_public = ephemeral_->public_key();
        exchange_.cipher_choice = support::keys::cipher_bit(cipher);
    }
    step.nonce = exchange_.acceptor_nonce;
    step.proof =
        support::keys::prove(*gate.key_, Role::acceptor, exchange_.transcript(gate.method_));
    step.cipher_choice = exchange_.cipher_choice;
    step.public_key = exchange_.acceptor_public;
    acceptor_proof_ = step.proof;
    stage_ = Stage::answered;
    return step;
}

Refusal KeyHandshake::check_proof(const KeyGate& gate, std::span<const std::uint8_t> proof) {
    if (!gate.keyed() || stage_ != Stage::answered) return Refusal::wrong_initiator_proof;
    if (!support::keys::verify(*gate.key_, Role::initiator, exchange_.transcript(gate.method_),
                               proof))
        return Refusal::wrong_initiator_proof;
    stage_ = Stage::proven;
    if (exchange_.cipher_choice != 0) {
        Proof initiator_proof;
        std::copy(proof.begin(), proof.end(), initiator_proof.begin());
        derive(gate, initiator_proof);
    }
    return Refusal::none;
}

void KeyHandshake::derive(const KeyGate& gate, const Proof& initiator_proof) {
    std::array<std::uint8_t, 2 * support::keys::proof_size> both;
    std::copy(acceptor_proof_.begin(), acceptor_proof_.end(), both.begin());
    std::copy(initiator_proof.begin(), initiator_proof.end(),
              both.begin() + acceptor_proof_.size());
    traffic_ = support::keys::derive_traffic_keys(*gate.key_, both, shared_, cipher());
    sodium_memzero(shared_.data(), shared_.size());
    ephemeral_.reset();
}

std::optional<TrafficKeys> KeyHandshake::take_traffic_keys() {
    std::optional<TrafficKeys> out = std::move(traffic_);
    traffic_.reset();
    return out;
}

support::keys::Cipher KeyHandshake::cipher() const {
    for (auto c : {support::keys::Cipher::aes256gcm, support::keys::Cipher::chacha20poly1305})
        if (exchange_.cipher_choice == support::keys::cipher_bit(c)) return c;
    return support::keys::Cipher::none;
}

namespace {
// A reset's own plane, so that no handshake's proof verifies as one, nor one as a proof.
support::keys::Transcript reset_transcript(const std::string& plane, const Nonce& probe,
                                           std::string_view prober, std::string_view resetter) {
    support::keys::Transcript t;
    t.plane = plane;
    t.initiator_nonce = probe;
    t.acceptor_endpoint = resetter;
    t.initiator_address = prober;
    return t;
}
}  // namespace

Proof KeyGate::prove_reset(const Nonce& probe, std::string_view prober,
                           std::string_view resetter) const {
    if (!keyed()) return Proof{};
    const std::string plane = method_ + " reset";
    return support::keys::prove(*key_, Role::acceptor,
                                reset_transcript(plane, probe, prober, resetter));
}

bool KeyGate::verify_reset(const Nonce& probe, std::string_view prober, std::string_view resetter,
                           std::span<const std::uint8_t> proof) const {
    if (!keyed()) return true;
    const std::string plane = method_ + " reset";
    return support::keys::verify(*key_, Role::acceptor,
                                 reset_transcript(plane, probe, prober, resetter), proof);
}

}  // namespace bmi::method::kit
