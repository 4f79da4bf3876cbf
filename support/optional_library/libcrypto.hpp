// SPDX-License-Identifier: LGPL-2.1-or-later
// libcrypto's EVP AEAD calls through a table filled by dlopen (optional_library.hpp), for the
// record cipher of encrypted connections: a program that never encrypts does not map libcrypto.
#pragma once

#include <openssl/evp.h>

#include <string>

namespace bmi::support {

struct Libcrypto {
    decltype(&::EVP_CIPHER_CTX_new) cipher_ctx_new;
    decltype(&::EVP_CIPHER_CTX_free) cipher_ctx_free;
    decltype(&::EVP_CIPHER_CTX_ctrl) cipher_ctx_ctrl;
    decltype(&::EVP_CipherInit_ex) cipher_init;
    decltype(&::EVP_CipherUpdate) cipher_update;
    decltype(&::EVP_CipherFinal_ex) cipher_final;
    decltype(&::EVP_aes_256_gcm) aes_256_gcm;
    decltype(&::EVP_chacha20_poly1305) chacha20_poly1305;
};

// OpenSSL 3's SONAME: the headers we compile against describe its layouts.
inline constexpr const char* libcrypto_file = "libcrypto.so.3";

// Opens libcrypto and fills the table on the first call (thread-safe); later calls return the
// first answer. nullptr if it cannot be loaded or lacks a function; `why` then says which.
const Libcrypto* load_libcrypto(std::string* why = nullptr);

}  // namespace bmi::support
