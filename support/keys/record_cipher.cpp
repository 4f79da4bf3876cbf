// SPDX-License-Identifier: LGPL-2.1-or-later
// Both record ciphers run through libcrypto's EVP, which seals AES-256-GCM several times faster
// than libsodium does on the same machine, and ChaCha20-Poly1305 faster too
// (doc/perf/encryption.md). The wire format is the AEADs' own: a 12-byte nonce, the header as
// associated data, a 16-byte tag. libsodium keeps the key exchange and the key derivation.
#include "support/keys/record_cipher.hpp"

#include <sodium.h>

#include <algorithm>

#include "support/optional_library/libcrypto.hpp"

namespace bmi::support::keys {

static_assert(traffic_iv_size == 12, "both AEADs take a 96-bit nonce");
static_assert(record_tag_size == 16, "both AEADs give a 128-bit tag");

// One EVP context per direction: the key is set once per key (load_key), each record sets only
// its nonce, which keeps AES's expanded key between records. libcrypto is opened by the first
// cipher (support/optional_library/libcrypto.hpp); without it every record fails.
struct RecordCipher::EvpState {
    const Libcrypto* evp = load_libcrypto();
    EVP_CIPHER_CTX* ctx = evp != nullptr ? evp->cipher_ctx_new() : nullptr;
    EvpState() = default;
    EvpState(const EvpState&) = delete;
    EvpState& operator=(const EvpState&) = delete;
    ~EvpState() {
        if (ctx != nullptr) evp->cipher_ctx_free(ctx);  // clears the key it holds
    }

    // One record, sealed (encrypt 1: writes tag) or opened (encrypt 0: checks tag); false if
    // libcrypto fails or the tag does not verify.
    bool run(int encrypt, const std::uint8_t* nonce, std::span<const std::uint8_t> header,
             const std::uint8_t* in, std::size_t size, std::uint8_t* out, std::uint8_t* tag) {
        int n = 0;
        if (evp->cipher_init(ctx, nullptr, nullptr, nullptr, nonce, encrypt) != 1) return false;
        if (!header.empty() && evp->cipher_update(ctx, nullptr, &n, header.data(),
                                                  static_cast<int>(header.size())) != 1)
            return false;
        if (size > 0 && evp->cipher_update(ctx, out, &n, in, static_cast<int>(size)) != 1)
            return false;
        if (encrypt == 0 &&
            evp->cipher_ctx_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, record_tag_size, tag) != 1)
            return false;
        std::uint8_t none[1];  // an AEAD's final step writes no bytes
        if (evp->cipher_final(ctx, none, &n) != 1) return false;
        return encrypt == 0 ||
               evp->cipher_ctx_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, record_tag_size, tag) == 1;
    }
};

RecordCipher::RecordCipher(Cipher cipher, const DirectionKey& first, std::uint64_t rekey_interval)
    : cipher_(cipher), key_(first), rekey_interval_(std::max<std::uint64_t>(rekey_interval, 1)) {
    if (!cipher_available(cipher_)) {
        failed_ = true;
        return;
    }
    load_key();
}

RecordCipher::~RecordCipher() = default;

void RecordCipher::load_key() {
    if (!evp_) evp_ = std::make_unique<EvpState>();
    // Without libcrypto, a context or the key every record fails, as for a cipher that is not
    // available.
    if (evp_->ctx == nullptr) {
        failed_ = true;
        return;
    }
    const Libcrypto& evp = *evp_->evp;
    const EVP_CIPHER* aead = cipher_ == Cipher::aes256gcm ? evp.aes_256_gcm()
                                                          : evp.chacha20_poly1305();
    if (evp.cipher_init(evp_->ctx, aead, nullptr, key_.key.data(), nullptr, 1) != 1) failed_ = true;
}

void RecordCipher::nonce(std::uint64_t counter, std::uint8_t* out) const {
    std::copy(key_.iv.begin(), key_.iv.end(), out);
    // The counter, big-endian, into the IV's last eight bytes.
    for (int i = 0; i < 8; ++i)
        out[traffic_iv_size - 1 - i] ^= static_cast<std::uint8_t>(counter >> (8 * i));
}

void RecordCipher::advance() {
    if (++in_key_ < rekey_interval_) return;
    key_ = next_key(key_);
    in_key_ = 0;
    ++keys_used_;
    load_key();
}

bool RecordCipher::seal_at(std::uint64_t counter, std::span<const std::uint8_t> header,
                           std::span<const std::uint8_t> plain, std::uint8_t* out,
                           std::span<std::uint8_t, record_tag_size> tag) {
    std::uint8_t npub[traffic_iv_size];
    nonce(counter, npub);
    if (failed_ || !evp_->run(1, npub, header, plain.data(), plain.size(), out, tag.data())) {
        // Nothing sealed may leave under a key we no longer trust: a tag that never verifies.
        failed_ = true;
        if (!plain.empty()) sodium_memzero(out, plain.size());
        std::fill(tag.begin(), tag.end(), 0);
        return false;
    }
    ++records_;
    return true;
}

bool RecordCipher::open_at(std::uint64_t counter, std::span<const std::uint8_t> header,
                           std::span<const std::uint8_t> sealed, std::uint8_t* out,
                           std::span<const std::uint8_t, record_tag_size> tag) {
    std::uint8_t npub[traffic_iv_size];
    nonce(counter, npub);
    // EVP takes the tag to check through a pointer to non-const; it only reads it.
    std::uint8_t expected[record_tag_size];
    std::copy(tag.begin(), tag.end(), expected);
    if (failed_ || !evp_->run(0, npub, header, sealed.data(), sealed.size(), out, expected)) {
        if (!sealed.empty()) sodium_memzero(out, sealed.size());
        return false;
    }
    ++records_;
    return true;
}

void RecordCipher::seal(std::span<const std::uint8_t> header, std::span<const std::uint8_t> plain,
                        std::uint8_t* out, std::span<std::uint8_t, record_tag_size> tag) {
    if (seal_at(in_key_, header, plain, out, tag)) advance();
}

bool RecordCipher::open(std::span<const std::uint8_t> header, std::span<std::uint8_t> data,
                        std::span<const std::uint8_t, record_tag_size> tag) {
    if (!open_at(in_key_, header, data, data.data(), tag)) {
        failed_ = true;  // the stream is damaged: every later record fails too
        return false;
    }
    advance();
    return true;
}

void RecordCipher::seal_numbered(std::uint64_t number, std::span<const std::uint8_t> header,
                                 std::span<const std::uint8_t> plain, std::uint8_t* out,
                                 std::span<std::uint8_t, record_tag_size> tag) {
    seal_at(number, header, plain, out, tag);
}

bool RecordCipher::open_numbered(std::uint64_t number, std::span<const std::uint8_t> header,
                                 std::span<const std::uint8_t> sealed, std::uint8_t* out,
                                 std::span<const std::uint8_t, record_tag_size> tag) {
    return open_at(number, header, sealed, out, tag);
}

}  // namespace bmi::support::keys
