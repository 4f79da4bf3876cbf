// SPDX-License-Identifier: LGPL-2.1-or-later
// The keyed handshake every method runs (doc/security.md), as one state machine:
//   initiator -> hello    its nonce
//   acceptor  -> answer   its nonce and its proof
//   initiator -> proof    its proof, once the acceptor's checks
// A method encodes these three messages in its own wire and sends them its own way; what each
// one must carry, when a peer is refused and why, and the one log line that says so are here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "methods/kit/key_exchange.hpp"
#include "support/keys/record_cipher.hpp"
#include "support/keys/refusal_log.hpp"
#include "support/keys/secret_key.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::support {
class Settings;
}

namespace bmi::method::kit {

using support::keys::Proof;
using support::keys::PublicKey;
using support::keys::TrafficKeys;

// Whether a keyed connection's traffic is encrypted (issue 39): never; with every peer that can;
// or only, refusing any peer that cannot.
enum class Encryption : std::uint8_t { off, prefer, require };

// A nonce as a hello carries it: a fixed field of the method's wire.
inline Nonce nonce_from(std::span<const std::uint8_t, support::keys::nonce_size> field) {
    Nonce nonce;
    std::copy(field.begin(), field.end(), nonce.begin());
    return nonce;
}

// Why a connection is refused before it may carry anything.
enum class Refusal : std::uint8_t {
    none,
    offers_no_proof,        // acceptor: a keyless libbmi initiator
    gives_no_proof,         // initiator: a keyless libbmi acceptor
    first_handshake,        // a libbmi from before proofs were bound to endpoints
    reflected_nonce,        // acceptor: the hello carries a nonce of one of our own handshakes
    wrong_acceptor_proof,   // initiator: another key, or a proof made on another socket
    wrong_initiator_proof,  // acceptor: another key, a replay, or a reflection
    malformed_proof,        // acceptor: the proof message is not one
    needs_our_key,          // initiator without a key: the acceptor admits only key holders
    refused_by_peer,        // initiator with a key: the acceptor refused us and said so
    legacy_framing,         // we were told to speak a framing that carries no proof
    legacy_first_frame,     // acceptor: an OrangeFS client, which cannot prove a key
    closed_before_proof,    // initiator: the acceptor hung up before its proof
    needs_encryption,       // we require encryption and the peer offers or chose none we run
    bad_cipher_choice,      // initiator: the acceptor chose a cipher we did not offer
    bad_public_key,         // its ephemeral key yields no shared secret (a low-order point)
    no_same_node_ticket,    // acceptor: a same-node listener's hello without a ticket of ours
    holds_no_ticket,        // initiator: a same-node listener refused us, and we hold no ticket
};

// The log's words for why.
std::string_view reason(Refusal why);

// Whether an acceptor tells the initiator it refused it (in the method's "key required"
// message) rather than only closing: a libbmi peer then fails its operations with
// -BMI_EACCES instead of retrying a reset.
bool tell_initiator(Refusal why);

// What a hello, answer or refusal says about keys, decoded by the method from its own wire.
struct KeyFeatures {
    bool proof = false;     // it carries a nonce (and, answering, a proof)
    bool binding = false;   // its proofs bind first-hand endpoints (this handshake's version)
    bool required = false;  // it admits only key holders (a refusal carries no proof)
    // Cipher bits (traffic_keys.hpp): a hello's offer, an answer's choice (one bit, or none);
    // with any, the message also carries an ephemeral public key.
    std::uint8_t ciphers = 0;
};

// One method instance's side of all its handshakes: the key (or none), our open nonces, and
// the refusal log, rate-limited per source so a flood costs one line per source a minute.
class KeyGate {
public:
    explicit KeyGate(std::string_view method) : method_(method) {}
    KeyGate(const KeyGate&) = delete;
    KeyGate& operator=(const KeyGate&) = delete;

    void use(support::keys::SharedKey key) { key_ = std::move(key); }
    // Encryption of keyed connections from now on (off without a key: nothing to derive from).
    void set_encryption(Encryption policy) { encryption_ = policy; }
    // After use(): the instance's encryption settings (policy, rekey interval). -BMI_EINVAL,
    // with a warning naming the setting, for prefer or require without a key.
    int load_encryption(const support::Settings& settings);
    std::uint64_t rekey_records() const { return rekey_records_; }
    Encryption encryption() const { return keyed() ? encryption_ : Encryption::off; }
    // The cipher bits our hellos offer and our answers choose from: none while off.
    std::uint8_t cipher_offer() const {
        return encryption() == Encryption::off ? 0 : support::keys::ciphers_available();
    }
    bool keyed() const { return key_ != nullptr; }
    // The proofs' feature bits to announce: both, or none without a key.
    KeyFeatures offered() const { return {keyed(), keyed(), false}; }

    // Logs that the connection `who` (from `source`, the rate limit's key) is refused and why.
    void log_refusal(const std::string& source, std::string_view who, Refusal why);
    std::uint64_t refused() const { return log_.refused(); }
    const support::keys::RefusalLog& log() const { return log_; }

    // A peer that holds no state of the prober's (it restarted) says so to the prober's probe:
    // the proof, bound to the probe's nonce and both endpoints as the prober names them, that
    // it holds the key, since what it says ends the prober's operations. All zero without a
    // key, and verify_reset then takes any: without a key nothing is proven anywhere.
    Proof prove_reset(const Nonce& probe, std::string_view prober, std::string_view resetter) const;
    bool verify_reset(const Nonce& probe, std::string_view prober, std::string_view resetter,
                      std::span<const std::uint8_t> proof) const;

private:
    friend class KeyHandshake;
    std::string method_;  // also what a proof is for: a proof for one method fails on another
    support::keys::SharedKey key_;
    Encryption encryption_ = Encryption::off;
    std::uint64_t rekey_records_ = support::keys::default_rekey_interval;  // per traffic key
    NoncesInFlight nonces_;
    support::keys::RefusalLog log_;
};

// One connection's handshake. Built keyed or keyless from the gate when the connection is
// made, so that a keyed connection holds back its traffic before the first message, too.
class KeyHandshake {
public:
    enum class Stage : std::uint8_t {
        keyless,   // no key: nothing to prove
        unproven,  // keyed, nothing exchanged yet
        offered,   // initiator: hello sent with our nonce, awaiting the answer
        answered,  // acceptor: answer sent with our proof, awaiting the initiator's
        proven,    // the other side's proof checked
    };

    // The outcome of one step: a refusal, or what our next message carries.
    struct Step {
        Refusal refusal = Refusal::none;
        Nonce nonce{};  // the acceptor's answer: our nonce
        Proof proof{};  // the answer's or the initiator's proof
        // The acceptor's answer: the cipher bit it chose (0: plain) and, with one, its public key.
        std::uint8_t cipher_choice = 0;
        PublicKey public_key{};
        bool refused() const { return refusal != Refusal::none; }
    };

    KeyHandshake() = default;
    explicit KeyHandshake(const KeyGate& gate)
        : stage_(gate.keyed() ? Stage::unproven : Stage::keyless) {}
    ~KeyHandshake();
    KeyHandshake(KeyHandshake&&) = default;
    KeyHandshake& operator=(KeyHandshake&&) = default;

    Stage stage() const { return stage_; }
    bool keyed() const { return stage_ != Stage::keyless; }
    bool proven() const { return stage_ == Stage::proven; }
    // What the initiator announced of itself: a name its peer may take once proven.
    const std::string& initiator_stated() const { return exchange_.initiator_stated; }

    // Initiator, keyed: the nonce our hello carries. `our_stated` is what the hello says of us,
    // fd the connected socket (the acceptor's endpoint is read from it first-hand). With
    // encryption on, the hello also carries hello_ciphers() and hello_public_key().
    const Nonce& offer(KeyGate& gate, int fd, std::string our_stated);
    // The same where no socket exists (libfabric's endpoints): the acceptor's endpoint as the
    // address we sent the hello to, the text the acceptor's answer() is given for itself.
    const Nonce& offer(KeyGate& gate, std::string acceptor_endpoint, std::string our_stated);
    std::uint8_t hello_ciphers() const { return exchange_.cipher_offer; }
    const PublicKey& hello_public_key() const { return exchange_.initiator_public; }
    // Both sides' stated limits (Transcript::terms), before the first proof is made or checked:
    // before check_answer (initiator) and answer (acceptor). Both must bind the same text, so
    // each binds it only when both hellos stated their limits.
    void bind_terms(std::string terms) { exchange_.terms = std::move(terms); }
    // Initiator: the acceptor's answer. Keyless, only a refusal that requires a key refuses.
    // Keyed, the step carries our proof, to send before anything else.
    // `public_key` is the answer's, read when features.ciphers chose one.
    Step check_answer(KeyGate& gate, KeyFeatures features, const Nonce& nonce,
                      std::string acceptor_stated, std::span<const std::uint8_t> proof,
                      const PublicKey& public_key = {});
    // Acceptor: a hello, before anything is built for it. Keyless, every hello passes.
    Refusal check_hello(const KeyGate& gate, KeyFeatures features) const;
    // Acceptor, keyed, after check_hello: our answer's nonce and proof.
    // `offer` is the hello's features (its cipher bits) and `public_key` its key, read when it
    // offered any; the step says what our answer adds (Step::cipher_choice, Step::public_key).
    Step answer(KeyGate& gate, int fd, const Nonce& initiator_nonce, std::string initiator_stated,
                std::string our_stated, KeyFeatures offer = {}, const PublicKey& public_key = {});
    // The same with our endpoint as text, where no socket exists (see offer).
    Step answer(KeyGate& gate, std::string our_endpoint, const Nonce& initiator_nonce,
                std::string initiator_stated, std::string our_stated, KeyFeatures offer = {},
                const PublicKey& public_key = {});
    // Acceptor: the initiator's proof. Nothing of the connection may reach the application
    // before this passes.
    Refusal check_proof(const KeyGate& gate, std::span<const std::uint8_t> proof);

    // Once proven with a cipher chosen: both directions' keys, handed over once (the method's
    // record layer owns them from then on). Nothing for plain traffic.
    std::optional<TrafficKeys> take_traffic_keys();
    support::keys::Cipher cipher() const;

private:
    // The keys from the shared secret and both proofs, which bind everything exchanged.
    void derive(const KeyGate& gate, const Proof& initiator_proof);

    Stage stage_ = Stage::keyless;
    KeyExchange exchange_;
    NoncesInFlight::Claim claim_;  // the initiator's nonce, until the acceptor's proof checks
    std::unique_ptr<support::keys::EphemeralKey> ephemeral_;  // with encryption, until derive
    support::keys::SharedSecret shared_{};
    Proof acceptor_proof_{};
    std::optional<TrafficKeys> traffic_;
};

}  // namespace bmi::method::kit
