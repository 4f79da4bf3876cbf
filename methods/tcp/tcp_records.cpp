// SPDX-License-Identifier: LGPL-2.1-or-later
// Sealing and opening tcp records; see tcp_records.hpp for the format.
#include "methods/tcp/tcp_records.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

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
    out_.insert(out_.end(), data, data + size);
}

std::size_t RecordLayer::seal(const iovec* iov, int count) {
    if (out_done_ == out_.size()) {
        out_.clear();
        out_done_ = 0;
    }
    std::size_t taken = 0;
    int at = 0;
    std::size_t at_byte = 0;
    while (out_.size() + record_wire_limit <= record_out_limit) {
        while (at < count && at_byte == iov[at].iov_len) {
            ++at;
            at_byte = 0;
        }
        if (at == count) break;
        const std::size_t start = out_.size();
        out_.resize(start + record_wire_limit);
        std::uint8_t* data = out_.data() + start + record_header_size;
        std::size_t len = 0;
        while (at < count && len < record_plain_limit) {
            const std::size_t chunk = std::min(iov[at].iov_len - at_byte, record_plain_limit - len);
            std::memcpy(data + len, static_cast<const std::uint8_t*>(iov[at].iov_base) + at_byte,
                        chunk);
            len += chunk;
            at_byte += chunk;
            if (at_byte == iov[at].iov_len) {
                ++at;
                at_byte = 0;
            }
        }
        std::uint8_t* head = out_.data() + start;
        put_length(head, static_cast<std::uint32_t>(len));
        sealer_.seal({head, record_header_size}, {data, len},
                     std::span<std::uint8_t, record_tag_size>(data + len, record_tag_size));
        out_.resize(start + record_header_size + len + record_tag_size);
        taken += len;
    }
    return taken;
}

int RecordLayer::flush(int fd) {
    while (pending_out()) {
        const iovec piece{out_.data() + out_done_, out_.size() - out_done_};
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
    const std::size_t taken = seal(iov, count);
    // The records are sealed and counted: whatever the socket does not take now goes first
    // on the next call, so the plaintext counts as written either way.
    if (taken > 0 && flush(fd) < 0) return -1;
    return static_cast<ssize_t>(taken);
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

ssize_t RecordLayer::read(int fd, const iovec* iov, int count, bool wait, int& error) {
    error = 0;
    if (!in_) in_ = std::make_unique<std::uint8_t[]>(record_in_limit);
    std::size_t got = 0;
    std::size_t at_iov = 0;
    std::size_t at_byte = 0;
    while (at_iov < static_cast<std::size_t>(count) && iov[at_iov].iov_len == 0) ++at_iov;
    while (true) {
        got += serve(iov, count, at_iov, at_byte);
        while (at_iov < static_cast<std::size_t>(count) && iov[at_iov].iov_len == 0) ++at_iov;
        if (at_iov == static_cast<std::size_t>(count)) return static_cast<ssize_t>(got);
        if (open_next(error)) continue;
        if (error != 0) {
            plain_pos_ = plain_end_;  // the damaged record delivers nothing, nor any after it
            in_pos_ = in_end_;
            return -1;
        }
        // Only a partial record is left: to the front, and fill up from the socket.
        if (in_pos_ > 0) {
            std::memmove(in_.get(), in_.get() + in_pos_, in_end_ - in_pos_);
            in_end_ -= in_pos_;
            in_pos_ = 0;
            plain_pos_ = plain_end_ = 0;
        }
        const iovec space{in_.get() + in_end_, record_in_limit - in_end_};
        const ssize_t n = receive_vector(fd, &space, 1, wait && got == 0);
        wait = false;
        if (n > 0) {
            in_end_ += static_cast<std::size_t>(n);
            continue;
        }
        // What was opened is authentic: it goes up now, the end or the error on the next call.
        if (got > 0) return static_cast<ssize_t>(got);
        if (n == 0) {
            failure_ = in_end_ > 0 ? "the stream ends inside a record" : "";
            error = in_end_ > 0 ? -BMI_EPROTO : -BMI_ECONNRESET;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            error = support::bmi_error_from_errno(errno);
        }
        return -1;
    }
}

}  // namespace bmi::method::tcp
