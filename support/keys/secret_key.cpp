// SPDX-License-Identifier: LGPL-2.1-or-later
// Key files and the locked memory a key lives in; see secret_key.hpp.
#include "support/keys/secret_key.hpp"

#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "bmi-types.h"
#include "support/files/regular_file.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::support::keys {

namespace {
// The file's bytes as a key: 32 raw bytes, or 64 hex digits and optional line end.
bool parse_key(const std::uint8_t* text, std::size_t size, std::uint8_t* key) {
    if (size == key_size) {
        std::memcpy(key, text, key_size);
        return true;
    }
    while (size > 0 && (text[size - 1] == '\n' || text[size - 1] == '\r')) --size;
    if (size != 2 * key_size) return false;
    std::size_t decoded = 0;
    return sodium_hex2bin(key, key_size, reinterpret_cast<const char*>(text), size, nullptr,
                          &decoded, nullptr) == 0 &&
           decoded == key_size;
}

int refuse(const std::string& path, const char* why, int error) {
    BMI_WARN("security key file '%s' refused: %s", path.c_str(), why);
    return error;
}
}  // namespace

std::unique_ptr<SecretKey> SecretKey::from_bytes(std::span<const std::uint8_t, key_size> bytes) {
    if (sodium_init() < 0) return nullptr;
    auto* memory = static_cast<std::uint8_t*>(sodium_malloc(key_size));
    if (memory == nullptr) return nullptr;
    std::memcpy(memory, bytes.data(), key_size);
    // Read-only from here on: a stray write through a bad pointer faults instead of silently
    // changing the key every later handshake would use.
    sodium_mprotect_readonly(memory);
    return std::unique_ptr<SecretKey>(new SecretKey(memory));
}

SecretKey::~SecretKey() { sodium_free(bytes_); }

int load_key_file(const std::string& path, SharedKey& out) {
    // sodium_malloc needs the library started (it aborts otherwise); idempotent and thread-safe.
    if (sodium_init() < 0) return refuse(path, "libsodium cannot start", -BMI_ENOMEM);
    const OpenedFile file = open_regular_file(path);
    if (file.fd < 0) {
        // A file that is not a regular one is refused as one we may not read.
        const bool denied = file.open_errno == 0 || file.open_errno == EACCES;
        return refuse(path, file.refusal.c_str(), denied ? -BMI_EACCES : -BMI_ENOENT);
    }
    const int fd = file.fd;
    const struct stat& st = file.status;
    // As ssh does with private keys: a key others can read is no longer a secret, and one
    // others can write is no longer ours.
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        close(fd);
        return refuse(path, "group or others have access to it (chmod 600 it)", -BMI_EACCES);
    }
    // Room for the longest accepted form plus one byte, so a longer file is seen as such.
    std::uint8_t* text = static_cast<std::uint8_t*>(sodium_malloc(2 * key_size + 3));
    if (text == nullptr) {
        close(fd);
        return -BMI_ENOMEM;
    }
    std::size_t size = 0;
    const bool read_ok = read_up_to(fd, text, 2 * key_size + 3, size);
    close(fd);
    std::array<std::uint8_t, key_size> key{};
    const bool parsed = read_ok && parse_key(text, size, key.data());
    sodium_free(text);
    if (!read_ok) return refuse(path, "read error", -BMI_ENOENT);
    if (!parsed) {
        sodium_memzero(key.data(), key.size());
        return refuse(path, "not a 32-byte key (32 raw bytes or 64 hex digits)", -BMI_EINVAL);
    }
    auto secret = SecretKey::from_bytes(key);
    sodium_memzero(key.data(), key.size());
    if (!secret) return -BMI_ENOMEM;
    out = std::move(secret);
    return 0;
}

int key_from_material(std::span<const std::uint8_t> material, SharedKey& out) {
    if (material.size() < 16 || material.size() > 64) return -BMI_EINVAL;
    if (sodium_init() < 0) return -BMI_ENOMEM;
    std::array<std::uint8_t, key_size> key{};
    if (material.size() == key_size)
        std::copy(material.begin(), material.end(), key.begin());
    else
        crypto_generichash(key.data(), key.size(), material.data(), material.size(), nullptr, 0);
    auto secret = SecretKey::from_bytes(key);
    sodium_memzero(key.data(), key.size());
    if (!secret) return -BMI_ENOMEM;
    out = std::move(secret);
    return 0;
}

int key_from_settings(const Settings& settings, SharedKey& out) {
    out.reset();
    const std::string path = settings.text(SettingId::key_file);
    if (path.empty()) return 0;
    return load_key_file(path, out);
}

int method_key(const SharedKey& given, const Settings& settings, SharedKey& out) {
    if (given) {
        out = given;
        return 0;
    }
    return key_from_settings(settings, out);
}

}  // namespace bmi::support::keys
