// SPDX-License-Identifier: LGPL-2.1-or-later
// The record layer of an encrypted tcp connection (doc/security.md, "Records"): once the keyed
// handshake chose a cipher, every byte either side writes, frames and all, travels in records
//     u32 length (little-endian, 1 .. record_plain_limit) | ciphertext | 16-byte tag
// with the length as associated data. It sits under the framing: the writer seals what it
// would have written, the reader opens whole records and serves their plaintext as if it came
// from the socket, so no frame code knows whether its connection is encrypted.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "support/keys/record_cipher.hpp"

namespace bmi::method::tcp {

inline constexpr std::size_t record_header_size = 4;
inline constexpr std::size_t record_plain_limit = 64 * 1024;
inline constexpr std::size_t record_wire_limit = record_header_size + record_plain_limit +
                                                 support::keys::record_tag_size;
// What one write seals before it must be written out: four full records. With the input
// buffer (two records) this bounds a connection's record buffers (doc/RELIABILITY.md).
inline constexpr std::size_t record_out_limit = 4 * record_wire_limit;
inline constexpr std::size_t record_in_limit = 2 * record_wire_limit;

class RecordLayer {
public:
    // keys from KeyHandshake::take_traffic_keys(); `initiator`: which direction is ours.
    RecordLayer(const support::keys::TrafficKeys& keys, bool initiator,
                std::uint64_t rekey_interval);

    support::keys::Cipher cipher() const { return sealer_.cipher(); }
    // Bytes that go out before the first record, as they are (the HELLO_PROOF that ends the
    // initiator's handshake: the acceptor reads it before it has keys).
    void queue_raw(const std::uint8_t* data, std::size_t size);

    // As send_vector: seals what iov holds (up to record_out_limit of records) and writes what
    // the socket takes; returns the plaintext bytes taken (the rest of their records goes out
    // on a later call), or -1 with errno (EAGAIN: sealed records still wait for the socket).
    ssize_t write(int fd, const iovec* iov, int count);
    // Writes sealed bytes still waiting; 0 when none is left, 1 if the socket is full, -1 with
    // errno on an error.
    int flush(int fd);
    bool pending_out() const { return out_done_ < out_.size(); }

    // As receive_vector, but the bytes are the records' plaintext, and iov is filled as far
    // as the socket and whole records allow (a short count means the socket is empty).
    // Returns the bytes, or -1: error 0 means nothing now (EAGAIN); otherwise it is the
    // -BMI_E* code that closes the connection (-BMI_EPROTO for a record that fails to open,
    // announces an impossible length or is cut by the end of the stream).
    ssize_t read(int fd, const iovec* iov, int count, bool wait, int& error);
    // Plaintext, or a whole record, waits here: no epoll event would announce it.
    bool has_input() const { return plain_pos_ < plain_end_ || in_end_ > in_pos_; }
    // Why the last read failed, for the log.
    const char* failure() const { return failure_; }

    std::uint64_t records_sealed() const { return sealer_.records(); }
    std::uint64_t records_opened() const { return opener_.records(); }
    // Bytes of our memory the buffers hold.
    std::size_t memory() const { return out_.capacity() + (in_ ? record_in_limit : 0); }

private:
    std::size_t seal(const iovec* iov, int count);
    bool open_next(int& error);
    std::size_t serve(const iovec* iov, int count, std::size_t& at_iov, std::size_t& at_byte);

    support::keys::RecordCipher sealer_;
    support::keys::RecordCipher opener_;
    std::vector<std::uint8_t> out_;
    std::size_t out_done_ = 0;
    std::unique_ptr<std::uint8_t[]> in_;
    std::size_t in_pos_ = 0;  // the next record's first byte
    std::size_t in_end_ = 0;
    std::size_t plain_pos_ = 0;  // the opened record's plaintext still to serve, inside in_
    std::size_t plain_end_ = 0;
    const char* failure_ = "";
};

}  // namespace bmi::method::tcp
