// SPDX-License-Identifier: LGPL-2.1-or-later
// The proof each side of a handshake gives that it holds the instance's key, without revealing
// it: an HMAC-SHA-512/256 under the key over a transcript of this one handshake. Pure functions;
// the methods carry the nonces and proofs in their own hello messages.
//
// The transcript binds: a domain and version string (a MAC made for anything else never
// verifies here), the role of the side that proves (a proof reflected back at its maker is the
// other role's and fails), both sides' fresh nonces (a recorded handshake replayed needs the
// other side's new nonce, which it cannot have), the method or plane, the acceptor's transport
// endpoint as each side sees it first-hand (a proof made on one socket fails on another), and
// what both sides state about themselves.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "support/keys/secret_key.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::support::keys {

inline constexpr std::size_t nonce_size = 32;
inline constexpr std::size_t proof_size = 32;
using Nonce = std::array<std::uint8_t, nonce_size>;
using Proof = std::array<std::uint8_t, proof_size>;

enum class Role : std::uint8_t {
    initiator = 1,  // connected; sends its nonce first, proves last
    acceptor = 2,   // accepted; answers with its nonce and its proof
};

struct Transcript {
    std::string_view plane;  // "tcp", "shm", ...: a proof for one method fails on another
    Nonce initiator_nonce{};
    Nonce acceptor_nonce{};
    std::string_view acceptor_endpoint;  // the socket address the initiator reached, first-hand
    std::string_view acceptor_address;   // what the acceptor states of itself
    std::string_view initiator_address;  // its announced listen address, "" for a client
    // Encryption (traffic_keys.hpp): each side's ephemeral public key (zero: it brought none),
    // the ciphers the initiator offered and the one the acceptor chose (cipher bits), so that
    // nobody on the path can strip or change them unnoticed.
    PublicKey initiator_public{};
    PublicKey acceptor_public{};
    std::uint8_t cipher_offer = 0;
    std::uint8_t cipher_choice = 0;
    // What both sides state of their limits, in the method's encoding (tcp: the unexpected
    // limits), so that nobody on the path changes them unseen. Bound only when not empty: a
    // handshake with a peer that states none proves what it always did.
    std::string_view terms{};
};

// 32 bytes from the system's CSPRNG (libsodium's randombytes).
Nonce fresh_nonce();

Proof prove(const SecretKey& key, Role role, const Transcript& transcript);

// True only if `proof` is exactly proof_size bytes and is role's proof for transcript under key.
// Constant time in the proof's content.
bool verify(const SecretKey& key, Role role, const Transcript& transcript,
            std::span<const std::uint8_t> proof);

}  // namespace bmi::support::keys
