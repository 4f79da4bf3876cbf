// SPDX-License-Identifier: LGPL-2.1-or-later
// An instance's security key: where it comes from (a key file named by the `key_file=` option or
// BMI_KEY_FILE) and how it is held (locked memory, left out of core dumps, wiped when dropped).
// The key never leaves this module except as the input of a MAC (key_proof.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "support/settings/settings.hpp"

namespace bmi::support::keys {

using support::SettingId;
using support::Settings;

inline constexpr std::size_t key_size = 32;

class SecretKey {
public:
    // 32 bytes in sodium_malloc'd memory (mlocked, guard pages, MADV_DONTDUMP); nullptr when
    // libsodium cannot start or the memory cannot be had.
    static std::unique_ptr<SecretKey> from_bytes(std::span<const std::uint8_t, key_size> bytes);
    ~SecretKey();  // sodium_free wipes the bytes before it gives the pages back
    SecretKey(const SecretKey&) = delete;
    SecretKey& operator=(const SecretKey&) = delete;

    const std::uint8_t* bytes() const { return bytes_; }

private:
    explicit SecretKey(std::uint8_t* bytes) : bytes_(bytes) {}
    std::uint8_t* bytes_;
};

using SharedKey = std::shared_ptr<const SecretKey>;

// Reads a key file: exactly 32 raw bytes, or 64 hex digits (an optional trailing newline is
// allowed). Refused with a logged reason naming the file, never its content:
//   -BMI_ENOENT  missing or unreadable;
//   -BMI_EACCES  group or others may read or write it, or it is not a regular file;
//   -BMI_EINVAL  any other length or content (a short key in particular).
int load_key_file(const std::string& path, SharedKey& out);

// A key handed over as bytes (PMIx's pmix.alloc.nsec): exactly 32 bytes are the key; 16 to 64
// bytes of any other length are hashed to 32 with BLAKE2b (libsodium's generic hash, no key),
// so every process given the same bytes holds the same key. Shorter or longer: -BMI_EINVAL.
int key_from_material(std::span<const std::uint8_t> material, SharedKey& out);

// The key an instance runs with: the file its key_file setting names (option `key_file=`, else
// BMI_KEY_FILE), else none (out stays empty and the result is 0: keyless, as OrangeFS).
int key_from_settings(const Settings& settings, SharedKey& out);

// A method's key: the one the control layer loaded for the instance (`given`), else what the
// settings name (a method created on its own, as the method-level tests do).
int method_key(const SharedKey& given, const Settings& settings, SharedKey& out);

}  // namespace bmi::support::keys
