// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/record_cipher.hpp"

#include <sodium.h>

#include <algorithm>

namespace bmi::support::keys {

namespace {
// libsodium declares its buffer arguments nonnull even for an empty message or header, and an
// empty span may hold nullptr: such a pointer is never read or written, so any address does.
std::uint8_t empty_buffer[1];
template <class T>
T* nonnull(T* p) {
    return p != nullptr ? p : empty_buffer;
}
}  // namespace

struct RecordCipher::AesState {
    crypto_aead_aes256gcm_state state;
};

RecordCipher::RecordCipher(Cipher cipher, const DirectionKey& first, std::uint64_t rekey_interval)
    : cipher_(cipher), key_(first), rekey_interval_(std::max<std::uint64_t>(rekey_interval, 1)) {
    if (!cipher_available(cipher_)) {
        failed_ = true;
        return;
    }
    load_key();
}

RecordCipher::~RecordCipher() {
    if (aes_) sodium_memzero(&aes_->state, sizeof aes_->state);
}

void RecordCipher::load_key() {
    if (cipher_ != Cipher::aes256gcm) return;
    if (!aes_) aes_ = std::make_unique<AesState>();
    crypto_aead_aes256gcm_beforenm(&aes_->state, key_.key.data());
}

void RecordCipher::nonce(std::uint8_t* out) const {
    static_assert(traffic_iv_size == crypto_aead_aes256gcm_NPUBBYTES);
    static_assert(traffic_iv_size == crypto_aead_chacha20poly1305_ietf_NPUBBYTES);
    std::copy(key_.iv.begin(), key_.iv.end(), out);
    // The counter, big-endian, into the IV's last eight bytes.
    for (int i = 0; i < 8; ++i)
        out[traffic_iv_size - 1 - i] ^= static_cast<std::uint8_t>(in_key_ >> (8 * i));
}

void RecordCipher::advance() {
    ++records_;
    if (++in_key_ < rekey_interval_) return;
    key_ = next_key(key_);
    in_key_ = 0;
    ++keys_used_;
    load_key();
}

void RecordCipher::seal(std::span<const std::uint8_t> header, std::span<const std::uint8_t> plain,
                        std::uint8_t* out, std::span<std::uint8_t, record_tag_size> tag) {
    static_assert(record_tag_size == crypto_aead_aes256gcm_ABYTES);
    static_assert(record_tag_size == crypto_aead_chacha20poly1305_ietf_ABYTES);
    if (failed_) {
        // Nothing sealed may leave under a key we no longer trust: a tag that never verifies.
        if (!plain.empty()) sodium_memzero(out, plain.size());
        std::fill(tag.begin(), tag.end(), 0);
        return;
    }
    std::uint8_t npub[traffic_iv_size];
    nonce(npub);
    unsigned long long tag_length = 0;
    if (cipher_ == Cipher::aes256gcm)
        crypto_aead_aes256gcm_encrypt_detached_afternm(
            nonnull(out), tag.data(), &tag_length, nonnull(plain.data()), plain.size(),
            nonnull(header.data()), header.size(), nullptr, npub, &aes_->state);
    else
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            nonnull(out), tag.data(), &tag_length, nonnull(plain.data()), plain.size(),
            nonnull(header.data()), header.size(), nullptr, npub, key_.key.data());
    advance();
}

bool RecordCipher::open(std::span<const std::uint8_t> header, std::span<std::uint8_t> data,
                        std::span<const std::uint8_t, record_tag_size> tag) {
    int rc = -1;
    if (!failed_) {
        std::uint8_t npub[traffic_iv_size];
        nonce(npub);
        if (cipher_ == Cipher::aes256gcm)
            rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
                nonnull(data.data()), nullptr, nonnull(data.data()), data.size(), tag.data(),
                nonnull(header.data()), header.size(), npub, &aes_->state);
        else
            rc = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                nonnull(data.data()), nullptr, nonnull(data.data()), data.size(), tag.data(),
                nonnull(header.data()), header.size(), npub, key_.key.data());
    }
    if (rc != 0) {
        failed_ = true;
        if (!data.empty()) sodium_memzero(data.data(), data.size());
        return false;
    }
    advance();
    return true;
}

}  // namespace bmi::support::keys
