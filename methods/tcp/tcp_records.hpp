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

#include "support/keys/record_cipher.hpp"

namespace bmi::method::tcp {

inline constexpr std::size_t record_header_size = 4;
inline constexpr std::size_t record_plain_limit = 64 * 1024;
inline constexpr std::size_t record_wire_limit = record_header_size + record_plain_limit +
                                                 support::keys::record_tag_size;
// Sealed bytes that wait for the socket at most: four full records. With the input buffer
// (two records) this bounds a connection's record buffers (doc/RELIABILITY.md).
inline constexpr std::size_t record_out_limit = 4 * record_wire_limit;
// A write hands its records to the socket as soon as this much is sealed, and seals the next
// ones only while the socket takes them: the peer opens one record while we seal the next.
inline constexpr std::size_t record_send_size = 16 * 1024;
inline constexpr std::size_t record_in_limit = 2 * record_wire_limit;
// Pieces shorter than this are copied together into one record; a longer one is sealed
// straight from the caller's buffer into records of its own, and a record this long that a
// receive can take whole is read into that receive and opened there.
inline constexpr std::size_t record_gather_limit = 4096;
// How far a read into the input buffer goes past the record it completes: enough for many
// small records per system call, little of a large record that could have gone direct.
inline constexpr std::size_t record_read_ahead = 16 * 1024;

class RecordLayer {
public:
    // keys from KeyHandshake::take_traffic_keys(); `initiator`: which direction is ours.
    RecordLayer(const support::keys::TrafficKeys& keys, bool initiator,
                std::uint64_t rekey_interval);

    support::keys::Cipher cipher() const { return sealer_.cipher(); }
    // Bytes that go out before the first record, as they are (the HELLO_PROOF that ends the
    // initiator's handshake: the acceptor reads it before it has keys).
    void queue_raw(const std::uint8_t* data, std::size_t size);

    // As send_vector: seals what iov holds, record by record while the socket takes them (up
    // to record_out_limit of records it has not taken), and writes them; returns the plaintext
    // bytes taken (the rest of their records goes out on a later call), or -1 with errno
    // (EAGAIN: sealed records still wait for the socket).
    ssize_t write(int fd, const iovec* iov, int count);
    // Writes sealed bytes still waiting; 0 when none is left, 1 if the socket is full, -1 with
    // errno on an error.
    int flush(int fd);
    bool pending_out() const { return out_done_ < out_end_; }

    // As receive_vector, but the bytes are the records' plaintext, and iov is filled as far
    // as the socket and whole records allow (a short count means the socket is empty).
    // Returns the bytes, or -1: error 0 means nothing now (EAGAIN); otherwise it is the
    // -BMI_E* code that closes the connection (-BMI_EPROTO for a record that fails to open,
    // announces an impossible length or is cut by the end of the stream).
    // into_receive: iov is a receive's buffer that stays put until the receive is whole or the
    // connection closes; then a large record may be read into it and opened there. That starts
    // only in a call that returns nothing else, so the caller's next call, which must go on
    // where this one ended, asks for the same bytes the same way.
    ssize_t read(int fd, const iovec* iov, int count, bool wait, int& error,
                 bool into_receive = false);
    // Plaintext, or a whole record, waits here: no epoll event would announce it.
    bool has_input() const { return plain_pos_ < plain_end_ || whole_record_buffered(); }
    // Part of a record has come and the rest is owed: the stall clock runs (Connection::partial).
    bool owes_input() const {
        return direct_.to != nullptr || (in_end_ > in_pos_ && !whole_record_buffered());
    }
    // Reads from the socket that brought bytes, whole records or not.
    std::uint64_t socket_reads() const { return socket_reads_; }
    // Why the last read failed, for the log.
    const char* failure() const { return failure_; }

    std::uint64_t records_sealed() const { return sealer_.records(); }
    std::uint64_t records_opened() const { return opener_.records(); }
    // Bytes of our memory the buffers hold.
    std::size_t memory() const {
        return (out_ ? record_out_limit : 0) + (in_ ? record_in_limit : 0);
    }

private:
    // A record whose plaintext a receive takes whole, read straight into it: its header (the
    // associated data), where the plaintext goes, and how much of it and of the tag has come.
    struct Direct {
        std::uint8_t header[record_header_size];
        std::uint8_t* to = nullptr;
        std::size_t length = 0;
        std::size_t body = 0;
        std::uint8_t tag[support::keys::record_tag_size];
        std::size_t tag_have = 0;
    };

    // Seals one record from iov at [at, at_byte] to the end of out_, moves past what it took
    // and returns that many plaintext bytes; out_ has room for a full record.
    std::size_t seal_record(const iovec* iov, int count, int& at, std::size_t& at_byte);
    bool whole_record_buffered() const;
    bool open_next(int& error);
    std::size_t serve(const iovec* iov, int count, std::size_t& at_iov, std::size_t& at_byte);
    void begin_direct(std::uint8_t* to, std::size_t room);
    // One read from the socket into the direct record or the input buffer; `drained`: one
    // into the input buffer took less than it asked for (the socket is empty for now).
    ssize_t fill(int fd, bool wait, bool& drained);
    bool finish_direct(int& error);
    void fail_input(int error_code, int& error);

    support::keys::RecordCipher sealer_;
    support::keys::RecordCipher opener_;
    std::unique_ptr<std::uint8_t[]> out_;
    std::size_t out_end_ = 0;
    std::size_t out_done_ = 0;
    std::unique_ptr<std::uint8_t[]> in_;
    std::size_t in_pos_ = 0;  // the next record's first byte
    std::size_t in_end_ = 0;
    std::size_t plain_pos_ = 0;  // the opened record's plaintext still to serve, inside in_
    std::size_t plain_end_ = 0;
    Direct direct_;
    std::uint64_t socket_reads_ = 0;
    const char* failure_ = "";
};

}  // namespace bmi::method::tcp
