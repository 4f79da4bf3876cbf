// SPDX-License-Identifier: LGPL-2.1-or-later
// HMAC-SHA-512/256 over a length-prefixed transcript; see key_proof.hpp.
#include "support/keys/key_proof.hpp"

#include <sodium.h>

namespace bmi::support::keys {

namespace {
// A change of transcript layout changes this string.
constexpr std::string_view domain = "libbmi key proof v3";

// Every variable-length field is preceded by its length, so no two different transcripts
// can encode to the same bytes ("ab"+"c" against "a"+"bc").
void absorb(crypto_auth_hmacsha512256_state& state, std::string_view field) {
    std::uint8_t length[8];
    std::uint64_t n = field.size();
    for (auto& b : length) {
        b = static_cast<std::uint8_t>(n);
        n >>= 8;
    }
    crypto_auth_hmacsha512256_update(&state, length, sizeof length);
    crypto_auth_hmacsha512256_update(&state, reinterpret_cast<const unsigned char*>(field.data()),
                                     field.size());
}

void absorb(crypto_auth_hmacsha512256_state& state, const Nonce& nonce) {
    crypto_auth_hmacsha512256_update(&state, nonce.data(), nonce.size());
}
}  // namespace

Nonce fresh_nonce() {
    // randombytes_buf starts its generator on first use; no sodium_init needed here.
    Nonce nonce;
    randombytes_buf(nonce.data(), nonce.size());
    return nonce;
}

Proof prove(const SecretKey& key, Role role, const Transcript& transcript) {
    static_assert(crypto_auth_hmacsha512256_BYTES == proof_size);
    static_assert(crypto_auth_hmacsha512256_KEYBYTES == key_size);
    crypto_auth_hmacsha512256_state state;
    crypto_auth_hmacsha512256_init(&state, key.bytes(), key_size);
    absorb(state, domain);
    const std::uint8_t role_byte = static_cast<std::uint8_t>(role);
    crypto_auth_hmacsha512256_update(&state, &role_byte, 1);
    absorb(state, transcript.plane);
    absorb(state, transcript.initiator_nonce);
    absorb(state, transcript.acceptor_nonce);
    absorb(state, transcript.acceptor_endpoint);
    absorb(state, transcript.acceptor_address);
    absorb(state, transcript.initiator_address);
    crypto_auth_hmacsha512256_update(&state, transcript.initiator_public.data(),
                                     transcript.initiator_public.size());
    crypto_auth_hmacsha512256_update(&state, transcript.acceptor_public.data(),
                                     transcript.acceptor_public.size());
    const std::uint8_t ciphers[2] = {transcript.cipher_offer, transcript.cipher_choice};
    crypto_auth_hmacsha512256_update(&state, ciphers, sizeof ciphers);
    // Last and length-prefixed: every field before it has a fixed size or its own prefix, so
    // a transcript with terms never encodes like one without.
    if (!transcript.terms.empty()) absorb(state, transcript.terms);
    Proof proof;
    crypto_auth_hmacsha512256_final(&state, proof.data());
    sodium_memzero(&state, sizeof state);  // the inner and outer pads are derived from the key
    return proof;
}

bool verify(const SecretKey& key, Role role, const Transcript& transcript,
            std::span<const std::uint8_t> proof) {
    if (proof.size() != proof_size) return false;
    const Proof expected = prove(key, role, transcript);
    return crypto_verify_32(expected.data(), proof.data()) == 0;
}

}  // namespace bmi::support::keys
