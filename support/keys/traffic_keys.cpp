// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/traffic_keys.hpp"

#include <sodium.h>

#include <cstring>
#include <string_view>

namespace bmi::support::keys {

namespace {

// BLAKE2b keyed with `key` over the fields, each preceded by its length so that no two
// different field lists hash the same bytes.
template <std::size_t N>
void keyed_hash(std::array<std::uint8_t, N>& out, std::span<const std::uint8_t> key,
                std::initializer_list<std::span<const std::uint8_t>> fields) {
    static_assert(N >= crypto_generichash_BYTES_MIN && N <= crypto_generichash_BYTES_MAX);
    crypto_generichash_state state;
    crypto_generichash_init(&state, key.data(), key.size(), N);
    for (const auto field : fields) {
        const std::uint64_t length = field.size();
        crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(&length),
                                  sizeof length);
        crypto_generichash_update(&state, field.data(), field.size());
    }
    crypto_generichash_final(&state, out.data(), N);
    sodium_memzero(&state, sizeof state);
}

std::span<const std::uint8_t> bytes_of(std::string_view text) {
    return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

// Splits 64 derived bytes into a direction's key and IV.
DirectionKey direction_from(const std::array<std::uint8_t, 64>& derived) {
    DirectionKey out;
    std::memcpy(out.key.data(), derived.data(), traffic_key_size);
    std::memcpy(out.iv.data(), derived.data() + traffic_key_size, traffic_iv_size);
    return out;
}

bool sodium_ready() {
    static const bool ready = sodium_init() >= 0;
    return ready;
}

}  // namespace

bool cipher_available(Cipher cipher) {
    switch (cipher) {
        case Cipher::aes256gcm:
            return sodium_ready() && crypto_aead_aes256gcm_is_available() != 0;
        case Cipher::chacha20poly1305:
            return sodium_ready();
        case Cipher::none:
            return false;
    }
    return false;
}

std::uint8_t ciphers_available() {
    std::uint8_t bits = 0;
    for (Cipher c : {Cipher::aes256gcm, Cipher::chacha20poly1305})
        if (cipher_available(c)) bits |= cipher_bit(c);
    return bits;
}

Cipher choose_cipher(std::uint8_t initiator_offer, std::uint8_t acceptor_offer) {
    const std::uint8_t both = initiator_offer & acceptor_offer;
    for (Cipher c : {Cipher::aes256gcm, Cipher::chacha20poly1305})
        if ((both & cipher_bit(c)) != 0) return c;
    return Cipher::none;
}

EphemeralKey::EphemeralKey() {
    sodium_ready();
    randombytes_buf(secret_.data(), secret_.size());
    crypto_scalarmult_base(public_.data(), secret_.data());
}

EphemeralKey::~EphemeralKey() { sodium_memzero(secret_.data(), secret_.size()); }

bool EphemeralKey::agree(const PublicKey& theirs, SharedSecret& out) const {
    static_assert(crypto_scalarmult_BYTES == shared_secret_size);
    if (crypto_scalarmult(out.data(), secret_.data(), theirs.data()) != 0) {
        sodium_memzero(out.data(), out.size());
        return false;
    }
    return true;
}

DirectionKey::~DirectionKey() {
    sodium_memzero(key.data(), key.size());
    sodium_memzero(iv.data(), iv.size());
}

TrafficKeys derive_traffic_keys(const SecretKey& psk, std::span<const std::uint8_t> transcript,
                                const SharedSecret& shared, Cipher cipher) {
    const std::uint8_t cipher_byte = static_cast<std::uint8_t>(cipher);
    std::array<std::uint8_t, 32> secret;
    keyed_hash(secret, {psk.bytes(), key_size},
               {bytes_of("libbmi traffic keys v1"), transcript, shared, {&cipher_byte, 1}});
    std::array<std::uint8_t, 64> derived;
    TrafficKeys keys;
    keys.cipher = cipher;
    keyed_hash(derived, secret, {bytes_of("initiator to acceptor")});
    keys.initiator_to_acceptor = direction_from(derived);
    keyed_hash(derived, secret, {bytes_of("acceptor to initiator")});
    keys.acceptor_to_initiator = direction_from(derived);
    sodium_memzero(derived.data(), derived.size());
    sodium_memzero(secret.data(), secret.size());
    return keys;
}

DirectionKey next_key(const DirectionKey& current) {
    std::array<std::uint8_t, 64> derived;
    keyed_hash(derived, current.key, {bytes_of("next key"), current.iv});
    DirectionKey next = direction_from(derived);
    sodium_memzero(derived.data(), derived.size());
    return next;
}

const char* cipher_name(Cipher cipher) {
    switch (cipher) {
        case Cipher::aes256gcm:
            return "AES-256-GCM";
        case Cipher::chacha20poly1305:
            return "ChaCha20-Poly1305";
        case Cipher::none:
            break;
    }
    return "none";
}

DirectionKey subkey(const DirectionKey& from, std::string_view purpose, std::uint64_t number) {
    std::array<std::uint8_t, 8> le{};
    for (std::size_t i = 0; i < le.size(); ++i)
        le[i] = static_cast<std::uint8_t>(number >> (8 * i));
    std::array<std::uint8_t, 64> derived;
    keyed_hash(derived, from.key, {bytes_of("subkey"), from.iv, bytes_of(purpose), le});
    DirectionKey out = direction_from(derived);
    sodium_memzero(derived.data(), derived.size());
    return out;
}

}  // namespace bmi::support::keys
