// SPDX-License-Identifier: LGPL-2.1-or-later
// Sealing and opening tcp records; see tcp_records.hpp for the format.
#include "methods/tcp/tcp_records.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "bmi-types.h"
#include "methods/tcp/tcp_socket.hpp"
#include "support/error/error_map.hpp"

namespace bmi::method::tcp {

namespace {
using support::keys::record_tag_size;

void put_length(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_length(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
}  // namespace

RecordLayer::RecordLayer(const support::keys::TrafficKeys& keys, bool initiator,
                         std::uint64_t rekey_interval)
    : sealer_(keys.cipher, initiator ? keys.initiator_to_acceptor : keys.acceptor_to_initiator,
              rekey_interval),
      opener_(keys.cipher, initiator ? keys.acceptor_to_initiator : keys.initiator_to_acceptor,
              rekey_interval) {}

void RecordLayer::queue_raw(const std::uint8_t* data, std::size_t size) {
    if (!out_) out_ = std::make_unique_for_overwrite<std::uint8_t[]>(record_out_limit);
    size = std::min(size, record_out_limit - out_end_);  // a handshake frame: far smaller
    std::memcpy(out_.get() + out_end_, data, size);
    out_end_ += size;
}

std::size_t RecordLayer::seal_record(const iovec* iov, int count, int& at, std::size_t& at_byte) {
    const auto skip_done = [&] {
        while (at < count && at_byte == iov[at].iov_len) {
            ++at;
            at_byte = 0;
        }
    };
    std::uint8_t* head = out_.get() + out_end_;
    std::uint8_t* data = head + record_header_size;
    // A piece of over half a record and up to two goes as two halves: the peer opens the
    // first while we seal the second. Smaller pieces gain less than a record's own cost.
    const std::size_t piece = iov[at].iov_len;
    const std::size_t unit = piece > record_plain_limit / 2 && piece <= 2 * record_plain_limit
                                 ? (piece + 1) / 2
                                 : record_plain_limit;
    std::size_t len = std::min(iov[at].iov_len - at_byte, unit);
    if (len >= record_gather_limit) {
        // One pass: from the caller's buffer, encrypted, into the record.
        put_length(head, static_cast<std::uint32_t>(len));
        sealer_.seal({head, record_header_size},
                     {static_cast<const std::uint8_t*>(iov[at].iov_base) + at_byte, len}, data,
                     std::span<std::uint8_t, record_tag_size>(data + len, record_tag_size));
        at_byte += len;
    } else {
        len = 0;
        while (at < count && len < record_plain_limit) {
            const std::size_t rest = iov[at].iov_len - at_byte;
            if (rest >= record_gather_limit) break;  // gets records of its own
            const std::size_t chunk = std::min(rest, record_plain_limit - len);
            std::memcpy(data + len, static_cast<const std::uint8_t*>(iov[at].iov_base) + at_byte,
                        chunk);
            len += chunk;
            at_byte += chunk;
            skip_done();
        }
        put_length(head, static_cast<std::uint32_t>(len));
        sealer_.seal({head, record_header_size}, {data, len},
                     std::span<std::uint8_t, record_tag_size>(data + len, record_tag_size));
    }
    out_end_ += record_header_size + len + record_tag_size;
    skip_done();
    return len;
}

int RecordLayer::flush(int fd) {
    while (pending_out()) {
        const iovec piece{out_.get() + out_done_, out_end_ - out_done_};
        const ssize_t written = send_vector(fd, &piece, 1);
        if (written < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        out_done_ += static_cast<std::size_t>(written);
    }
    return 0;
}

ssize_t RecordLayer::write(int fd, const iovec* iov, int count) {
    if (const int rc = flush(fd); rc != 0) {
        if (rc > 0) errno = EAGAIN;
        return -1;
    }
    if (!out_) out_ = std::make_unique_for_overwrite<std::uint8_t[]>(record_out_limit);
    out_done_ = out_end_ = 0;
    std::size_t taken = 0;
    int at = 0;
    std::size_t at_byte = 0;
    while (at < count && at_byte == iov[at].iov_len) ++at;  // empty pieces
    while (at < count && out_end_ + record_wire_limit <= record_out_limit) {
        taken += seal_record(iov, count, at, at_byte);
        if (out_end_ - out_done_ < record_send_size) continue;
        // Out at once, so the peer opens this record while we seal the next, and the buffer,
        // written, takes the next record where this one was (still in cache).
        const int rc = flush(fd);
        if (rc < 0) return -1;
        if (rc > 0) break;  // the socket is full: what is sealed waits, nothing more is
        out_done_ = out_end_ = 0;
    }
    // The records are sealed and counted: whatever the socket does not take now goes first
    // on the next call, so the plaintext counts as written either way.
    if (taken > 0 && flush(fd) < 0) return -1;
    return static_cast<ssize_t>(taken);
}

bool RecordLayer::whole_record_buffered() const {
    const std::size_t avail = in_end_ - in_pos_;
    if (avail < record_header_size) return false;
    const std::uint32_t length = get_length(in_.get() + in_pos_);
    // An impossible length counts as whole: opening it is what reports it.
    return length == 0 || length > record_plain_limit ||
           avail >= record_header_size + length + record_tag_size;
}

bool RecordLayer::open_next(int& error) {
    const std::size_t avail = in_end_ - in_pos_;
    if (avail < record_header_size) return false;
    std::uint8_t* record = in_.get() + in_pos_;
    const std::uint32_t length = get_length(record);
    if (length == 0 || length > record_plain_limit) {
        failure_ = "a record announces an impossible length";
        error = -BMI_EPROTO;
        return false;
    }
    if (avail < record_header_size + length + record_tag_size) return false;
    std::uint8_t* data = record + record_header_size;
    if (!opener_.open(
            {record, record_header_size}, {data, length},
            std::span<const std::uint8_t, record_tag_size>(data + length, record_tag_size))) {
        failure_ = "a record failed authentication (changed, dropped, repeated or moved)";
        error = -BMI_EPROTO;
        return false;
    }
    plain_pos_ = in_pos_ + record_header_size;
    plain_end_ = plain_pos_ + length;
    in_pos_ += record_header_size + length + record_tag_size;
    return true;
}

std::size_t RecordLayer::serve(const iovec* iov, int count, std::size_t& at_iov,
                               std::size_t& at_byte) {
    std::size_t moved = 0;
    while (at_iov < static_cast<std::size_t>(count) && plain_pos_ < plain_end_) {
        const iovec& piece = iov[at_iov];
        const std::size_t chunk = std::min(piece.iov_len - at_byte, plain_end_ - plain_pos_);
        std::memcpy(static_cast<std::uint8_t*>(piece.iov_base) + at_byte, in_.get() + plain_pos_,
                    chunk);
        plain_pos_ += chunk;
        at_byte += chunk;
        moved += chunk;
        if (at_byte == piece.iov_len) {
            ++at_iov;
            at_byte = 0;
        }
    }
    return moved;
}

// Called with no plaintext and no whole record buffered: if the next record is large and `to`
// can take all its plaintext, what came of it moves there and the rest will be read there.
void RecordLayer::begin_direct(std::uint8_t* to, std::size_t room) {
    const std::size_t avail = in_end_ - in_pos_;
    if (avail < record_header_size) return;
    const std::uint8_t* record = in_.get() + in_pos_;
    const std::uint32_t length = get_length(record);
    if (length < record_gather_limit || length > room) return;
    std::memcpy(direct_.header, record, record_header_size);
    direct_.to = to;
    direct_.length = length;
    direct_.body = avail - record_header_size;  // the record is not whole: less than length + tag
    direct_.tag_have = 0;
    if (direct_.body > length) {
        direct_.tag_have = direct_.body - length;
        direct_.body = length;
    }
    std::memcpy(to, record + record_header_size, direct_.body);
    std::memcpy(direct_.tag, record + record_header_size + length, direct_.tag_have);
    in_pos_ = in_end_ = 0;
    plain_pos_ = plain_end_ = 0;
}

ssize_t RecordLayer::fill(int fd, bool wait, bool& drained) {
    if (direct_.to != nullptr) {
        // The rest of the plaintext into the receive, the tag aside, and the next record's
        // length: the next call knows whether that record can go direct as well.
        const iovec pieces[3] = {
            {direct_.to + direct_.body, direct_.length - direct_.body},
            {direct_.tag + direct_.tag_have, record_tag_size - direct_.tag_have},
            {in_.get(), record_header_size}};
        const ssize_t n = receive_vector(fd, pieces, 3, wait);
        if (n <= 0) return n;
        std::size_t left = static_cast<std::size_t>(n);
        const std::size_t body = std::min(left, direct_.length - direct_.body);
        direct_.body += body;
        left -= body;
        const std::size_t tag = std::min(left, record_tag_size - direct_.tag_have);
        direct_.tag_have += tag;
        in_end_ = left - tag;
        ++socket_reads_;
        return n;
    }
    // Only a partial record is left: to the front, and fill up from the socket.
    if (in_pos_ > 0) {
        std::memmove(in_.get(), in_.get() + in_pos_, in_end_ - in_pos_);
        in_end_ -= in_pos_;
        in_pos_ = 0;
        plain_pos_ = plain_end_ = 0;
    }
    std::size_t want = record_read_ahead;
    if (in_end_ >= record_header_size) {
        const std::size_t whole = record_header_size +
                                  std::min<std::size_t>(get_length(in_.get()), record_plain_limit) +
                                  record_tag_size;
        if (whole > in_end_) want += whole - in_end_;
    }
    const iovec space{in_.get() + in_end_, std::min(want, record_in_limit - in_end_)};
    const ssize_t n = receive_vector(fd, &space, 1, wait);
    if (n > 0) {
        in_end_ += static_cast<std::size_t>(n);
        ++socket_reads_;
        drained = static_cast<std::size_t>(n) < space.iov_len;
    }
    return n;
}

bool RecordLayer::finish_direct(int& error) {
    std::uint8_t* to = std::exchange(direct_.to, nullptr);
    if (!opener_.open(
            {direct_.header, record_header_size}, {to, direct_.length},
            std::span<const std::uint8_t, record_tag_size>(direct_.tag, record_tag_size))) {
        failure_ = "a record failed authentication (changed, dropped, repeated or moved)";
        error = -BMI_EPROTO;
        return false;
    }
    return true;
}

void RecordLayer::fail_input(int error_code, int& error) {
    error = error_code;
    // The damaged record delivers nothing, nor any after it.
    plain_pos_ = plain_end_;
    in_pos_ = in_end_;
    direct_.to = nullptr;
}

ssize_t RecordLayer::read(int fd, const iovec* iov, int count, bool wait, int& error,
                          bool into_receive) {
    error = 0;
    if (!in_) in_ = std::make_unique_for_overwrite<std::uint8_t[]>(record_in_limit);
    const auto pieces = static_cast<std::size_t>(count);
    std::size_t got = 0;
    std::size_t at_iov = 0;
    std::size_t at_byte = 0;
    bool drained = false;
    const auto skip_full = [&] {
        while (at_iov < pieces && at_byte == iov[at_iov].iov_len) {
            ++at_iov;
            at_byte = 0;
        }
    };
    skip_full();
    while (true) {
        got += serve(iov, count, at_iov, at_byte);
        skip_full();
        if (at_iov == pieces) return static_cast<ssize_t>(got);
        std::uint8_t* const target = static_cast<std::uint8_t*>(iov[at_iov].iov_base) + at_byte;
        const std::size_t room = iov[at_iov].iov_len - at_byte;
        if (direct_.to != nullptr) {
            // Nothing of the record went up yet, so the caller reads into the same place again;
            // anything else means the receive it was going into is gone.
            if (direct_.to != target || direct_.length > room) {
                failure_ = "the receive a record was being read into went away";
                fail_input(-BMI_EPROTO, error);
                return -1;
            }
        } else if (open_next(error)) {
            continue;
        } else if (error != 0) {
            fail_input(error, error);
            return -1;
        } else if (into_receive && got == 0) {
            // Only from a call that served nothing: a short count changes what the caller
            // reads next (the rest of a receive may go through its read-ahead buffer instead).
            begin_direct(target, room);
        }
        // The last read into the input buffer found the socket empty and ended on a record's
        // end: another would only say EAGAIN (a small message costs it on each side). Inside
        // a record, the rest may be arriving as we read, and is tried for.
        if (drained && got > 0 && in_pos_ == in_end_) return static_cast<ssize_t>(got);
        const ssize_t n = fill(fd, wait && got == 0, drained);
        wait = false;
        if (n > 0) {
            if (direct_.to != nullptr && direct_.body == direct_.length &&
                direct_.tag_have == record_tag_size) {
                if (!finish_direct(error)) {
                    fail_input(error, error);
                    return -1;
                }
                got += direct_.length;
                at_byte += direct_.length;
                skip_full();
            }
            continue;
        }
        // What was opened is authentic: it goes up now, the end or the error on the next call.
        if (got > 0) return static_cast<ssize_t>(got);
        if (n == 0) {
            const bool cut = in_end_ > in_pos_ || direct_.to != nullptr;
            // Ciphertext of a record never opened stays out of the receive as well.
            if (direct_.to != nullptr) std::memset(direct_.to, 0, direct_.body);
            failure_ = cut ? "the stream ends inside a record" : "";
            fail_input(cut ? -BMI_EPROTO : -BMI_ECONNRESET, error);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fail_input(support::bmi_error_from_errno(errno), error);
        }
        return -1;
    }
}

}  // namespace bmi::method::tcp
