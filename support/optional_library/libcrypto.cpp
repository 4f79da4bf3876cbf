// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/libcrypto.hpp"

#include "support/optional_library/optional_library.hpp"

namespace bmi::support {

namespace {
Libcrypto libcrypto_table;

void fill(SymbolFiller& take, Libcrypto& t) {
    take(t.cipher_ctx_new, "EVP_CIPHER_CTX_new");
    take(t.cipher_ctx_free, "EVP_CIPHER_CTX_free");
    take(t.cipher_ctx_ctrl, "EVP_CIPHER_CTX_ctrl");
    take(t.cipher_init, "EVP_CipherInit_ex");
    take(t.cipher_update, "EVP_CipherUpdate");
    take(t.cipher_final, "EVP_CipherFinal_ex");
    take(t.aes_256_gcm, "EVP_aes_256_gcm");
    take(t.chacha20_poly1305, "EVP_chacha20_poly1305");
}
}  // namespace

const Libcrypto* load_libcrypto(std::string* why) {
    static OptionalLibrary library({libcrypto_file});
    return load_table(library, libcrypto_table, fill, why);
}

}  // namespace bmi::support
