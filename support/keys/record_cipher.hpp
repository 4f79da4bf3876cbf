// SPDX-License-Identifier: LGPL-2.1-or-later
// One direction of a connection's records under authenticated encryption (issue 39). A record
// is a header, authenticated but sent as it is, and data, encrypted; its tag follows it. Each
// record's nonce is the direction's IV XOR the record's number under the current key, which both
// sides count and never send: a record dropped, repeated, moved or cut is opened with another
// nonce, or with another length, and fails. Every rekey_interval records both sides step to the
// next key (next_key), far below the number of records one AES-GCM key may safely seal.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "support/keys/traffic_keys.hpp"

namespace bmi::support::keys {

inline constexpr std::size_t record_tag_size = 16;
// Records per key unless a setting says otherwise: 2^20 records of up to 64 KiB each are 64 GiB,
// well inside the 2^32 records one AES-GCM key may seal with random-looking nonces.
inline constexpr std::uint64_t default_rekey_interval = std::uint64_t{1} << 20;

class RecordCipher {
public:
    // rekey_interval >= 1 and cipher available (cipher_available); a cipher that is not gives
    // a RecordCipher whose every record fails.
    RecordCipher(Cipher cipher, const DirectionKey& first, std::uint64_t rekey_interval);
    ~RecordCipher();
    RecordCipher(const RecordCipher&) = delete;
    RecordCipher& operator=(const RecordCipher&) = delete;

    // Encrypts `data` in place and writes its tag.
    void seal(std::span<const std::uint8_t> header, std::span<std::uint8_t> data,
              std::span<std::uint8_t, record_tag_size> tag) {
        seal(header, data, data.data(), tag);
    }
    // Encrypts `plain` into `out` (plain.size() bytes; the same or a disjoint buffer) in one
    // pass, so a sender need not copy its data next to the record's header first.
    void seal(std::span<const std::uint8_t> header, std::span<const std::uint8_t> plain,
              std::uint8_t* out, std::span<std::uint8_t, record_tag_size> tag);
    // Decrypts `data` in place; false if the record fails authentication. Then data is wiped,
    // and this and every later record fail: the stream is damaged and its connection must close.
    bool open(std::span<const std::uint8_t> header, std::span<std::uint8_t> data,
              std::span<const std::uint8_t, record_tag_size> tag);

    // Records whose sender numbers them (a transport that may deliver out of order): `number`
    // is the nonce's counter under the current key, which never steps. A failed open neither
    // wipes more than `data` nor fails later records: which numbers are taken is the caller's.
    void seal_numbered(std::uint64_t number, std::span<const std::uint8_t> header,
                       std::span<const std::uint8_t> plain, std::uint8_t* out,
                       std::span<std::uint8_t, record_tag_size> tag);
    bool open_numbered(std::uint64_t number, std::span<const std::uint8_t> header,
                       std::span<std::uint8_t> data,
                       std::span<const std::uint8_t, record_tag_size> tag) {
        return open_numbered(number, header, data, data.data(), tag);
    }
    // The same, into `out` (sealed.size() bytes; the same or a disjoint buffer), so a receiver
    // need not copy what it opened; a failed open wipes `out`.
    bool open_numbered(std::uint64_t number, std::span<const std::uint8_t> header,
                       std::span<const std::uint8_t> sealed, std::uint8_t* out,
                       std::span<const std::uint8_t, record_tag_size> tag);

    bool failed() const { return failed_; }
    Cipher cipher() const { return cipher_; }
    // Records sealed or opened so far, and the keys they used (1 before the first rekey).
    std::uint64_t records() const { return records_; }
    std::uint64_t keys_used() const { return keys_used_; }

private:
    struct EvpState;
    void nonce(std::uint64_t counter, std::uint8_t* out) const;
    // One record under `counter`, counted if it sealed or opened; a failed seal fails every
    // later record, a failed open wipes `data` (whether later ones fail is the caller's call).
    bool seal_at(std::uint64_t counter, std::span<const std::uint8_t> header,
                 std::span<const std::uint8_t> plain, std::uint8_t* out,
                 std::span<std::uint8_t, record_tag_size> tag);
    bool open_at(std::uint64_t counter, std::span<const std::uint8_t> header,
                 std::span<const std::uint8_t> sealed, std::uint8_t* out,
                 std::span<const std::uint8_t, record_tag_size> tag);
    void advance();
    void load_key();

    Cipher cipher_;
    DirectionKey key_;
    std::uint64_t rekey_interval_;
    std::uint64_t in_key_ = 0;  // records under the current key: the nonce's counter
    std::uint64_t records_ = 0;
    std::uint64_t keys_used_ = 1;
    bool failed_ = false;
    std::unique_ptr<EvpState> evp_;  // the cipher keyed with the current key
};

}  // namespace bmi::support::keys
