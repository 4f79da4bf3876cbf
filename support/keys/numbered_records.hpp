// SPDX-License-Identifier: LGPL-2.1-or-later
// One connection's records over a transport that may hand them over out of order (libfabric's
// rxm completes a large message after later small ones; doc/security.md, "ofi"). Each record
// carries its number, sent as it is and authenticated: the number is its nonce's counter, so
// a record moved to another number fails, and the receiver takes each number once, within a
// window behind the highest it has opened, so a repeated or very late record fails too.
// Every rekey_interval numbers both sides use the next key, a subkey of the direction's first.
//   record: ciphertext | number (8, little-endian) | tag (16)
//   associated data: the transport's 64-bit label (ofi: the libfabric tag) | number
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "support/keys/record_cipher.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::support::keys {

class NumberedRecords {
public:
    static constexpr std::size_t trailer_size = 8 + record_tag_size;
    // How far behind the highest number opened a record may still come.
    static constexpr std::uint64_t window = 1024;

    // `initiator`: we sent the handshake's hello.
    NumberedRecords(const TrafficKeys& keys, bool initiator, std::uint64_t rekey_interval);
    ~NumberedRecords();
    NumberedRecords(const NumberedRecords&) = delete;
    NumberedRecords& operator=(const NumberedRecords&) = delete;

    Cipher cipher() const { return cipher_; }
    // The number the next record sealed takes.
    std::uint64_t next_number() const { return next_; }
    // Seals `plain` into `out` (plain.size() + trailer_size bytes; out may be plain.data()):
    // the number it took.
    std::uint64_t seal(std::uint64_t label, std::span<const std::uint8_t> plain, std::uint8_t* out);
    // Opens a record of `size` bytes in place: its plaintext's size (at record), and its
    // number in `number`; nothing if it is too short, changed, repeated or too late (then its
    // bytes are wiped).
    std::optional<std::size_t> open(std::uint64_t label, std::uint8_t* record, std::size_t size,
                                    std::uint64_t& number);
    // The key of one large message sent, or received, under the record numbered `number`
    // (support/keys/sealed_bulk.hpp).
    DirectionKey send_bulk_key(std::uint64_t number) const;
    DirectionKey recv_bulk_key(std::uint64_t number) const;
    std::uint64_t sealed() const { return sealed_; }
    std::uint64_t opened() const { return opened_; }

private:
    // The cipher of `number`'s key: one kept for sealing, the last two used for opening.
    RecordCipher& sealer(std::uint64_t number);
    RecordCipher& opener(std::uint64_t number);
    bool seen(std::uint64_t number) const;
    void mark(std::uint64_t number);

    Cipher cipher_;
    std::uint64_t rekey_interval_;
    DirectionKey send_base_;
    DirectionKey recv_base_;
    std::uint64_t next_ = 0;
    std::uint64_t sealed_ = 0;
    std::uint64_t opened_ = 0;
    std::uint64_t send_epoch_ = 0;
    std::unique_ptr<RecordCipher> send_;
    struct Opener {
        std::uint64_t epoch = 0;
        std::unique_ptr<RecordCipher> cipher;
    };
    std::array<Opener, 2> recv_;
    std::size_t recv_last_ = 0;  // the slot used last: the other one is replaced first
    // Numbers opened: the highest, and a bit per number in the window behind it.
    bool any_opened_ = false;
    std::uint64_t highest_ = 0;
    std::array<std::uint64_t, window / 64> opened_bits_{};
};

}  // namespace bmi::support::keys
