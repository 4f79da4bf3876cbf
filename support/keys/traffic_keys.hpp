// SPDX-License-Identifier: LGPL-2.1-or-later
// The keys that encrypt a connection once its keyed handshake has run (issue 39). Each side
// brings an ephemeral X25519 key pair to the handshake; their shared secret, which nobody on
// the path can compute and which both sides forget when the connection ends, is mixed with the
// pre-shared key and a digest of everything both proofs covered (nonces, endpoints, the public
// keys, the cipher chosen). So a recording of the traffic stays unreadable to whoever learns
// the pre-shared key later, and a key stripped or changed on the path fails the proofs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "support/keys/secret_key.hpp"

namespace bmi::support::keys {

inline constexpr std::size_t public_key_size = 32;
inline constexpr std::size_t shared_secret_size = 32;
inline constexpr std::size_t traffic_key_size = 32;
inline constexpr std::size_t traffic_iv_size = 12;
using PublicKey = std::array<std::uint8_t, public_key_size>;
using SharedSecret = std::array<std::uint8_t, shared_secret_size>;

// The record ciphers, as a hello's offer names them (one bit each).
enum class Cipher : std::uint8_t {
    none = 0,
    aes256gcm = 1,         // where the CPU has AES-NI and carry-less multiply
    chacha20poly1305 = 2,  // IETF variant, everywhere else
};
inline constexpr std::uint8_t cipher_bit(Cipher cipher) {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(cipher));
}

// The cipher's name for logs and bmi-info ("none" for plain traffic).
const char* cipher_name(Cipher cipher);
// Whether this process can run the cipher (libsodium's AES-GCM needs the CPU's instructions).
bool cipher_available(Cipher cipher);
// The bits of every cipher this process can run.
std::uint8_t ciphers_available();
// The acceptor's pick from both offers: AES-256-GCM if both run it (the faster where it
// exists), else ChaCha20-Poly1305 if both do, else none.
Cipher choose_cipher(std::uint8_t initiator_offer, std::uint8_t acceptor_offer);

// One side's key pair for one handshake; the secret half is wiped when it goes.
class EphemeralKey {
public:
    EphemeralKey();
    ~EphemeralKey();
    EphemeralKey(const EphemeralKey&) = delete;
    EphemeralKey& operator=(const EphemeralKey&) = delete;

    const PublicKey& public_key() const { return public_; }
    // The secret shared with the holder of `theirs`; false (and out wiped) for a public key
    // that yields the all-zero secret, which a peer could force with a low-order point.
    bool agree(const PublicKey& theirs, SharedSecret& out) const;

private:
    std::array<std::uint8_t, 32> secret_{};
    PublicKey public_{};
};

// One direction's key and IV; wiped when it goes.
struct DirectionKey {
    std::array<std::uint8_t, traffic_key_size> key{};
    std::array<std::uint8_t, traffic_iv_size> iv{};
    DirectionKey() = default;
    DirectionKey(const DirectionKey&) = default;
    DirectionKey& operator=(const DirectionKey&) = default;
    ~DirectionKey();
};

struct TrafficKeys {
    Cipher cipher = Cipher::none;
    DirectionKey initiator_to_acceptor;
    DirectionKey acceptor_to_initiator;
};

// Both directions' first keys, from the pre-shared key, the digest of the handshake's
// transcript and the ephemeral secret.
TrafficKeys derive_traffic_keys(const SecretKey& psk, std::span<const std::uint8_t> transcript,
                                const SharedSecret& shared, Cipher cipher);

// The key after `current`: both sides step a direction at the same record count, so no message
// announces it, and the old key cannot be computed from the new one.
DirectionKey next_key(const DirectionKey& current);

// A key of its own for one use of a direction (`purpose`, e.g. one message's bulk data, named
// by `number`): records sealed under it never share a nonce with the direction's own records
// or with another number's, and it cannot be turned back into `from`.
DirectionKey subkey(const DirectionKey& from, std::string_view purpose, std::uint64_t number);

}  // namespace bmi::support::keys
