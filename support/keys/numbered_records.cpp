// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/keys/numbered_records.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace bmi::support::keys {

namespace {
constexpr std::string_view records_purpose = "numbered records";
constexpr std::string_view bulk_purpose = "numbered records bulk data";
// An epoch's key seals at most rekey_interval numbers: it never steps by itself.
constexpr std::uint64_t never = ~std::uint64_t{0};

std::array<std::uint8_t, 16> header_of(std::uint64_t label, std::uint64_t number) {
    std::array<std::uint8_t, 16> h;
    std::memcpy(h.data(), &label, 8);
    std::memcpy(h.data() + 8, &number, 8);
    return h;
}
}  // namespace

NumberedRecords::NumberedRecords(const TrafficKeys& keys, bool initiator,
                                 std::uint64_t rekey_interval)
    : cipher_(keys.cipher),
      rekey_interval_(std::max<std::uint64_t>(rekey_interval, 1)),
      send_base_(initiator ? keys.initiator_to_acceptor : keys.acceptor_to_initiator),
      recv_base_(initiator ? keys.acceptor_to_initiator : keys.initiator_to_acceptor) {}

NumberedRecords::~NumberedRecords() = default;

RecordCipher& NumberedRecords::sealer(std::uint64_t number) {
    const std::uint64_t epoch = number / rekey_interval_;
    if (!send_ || epoch != send_epoch_) {
        send_ = std::make_unique<RecordCipher>(cipher_, subkey(send_base_, records_purpose, epoch),
                                               never);
        send_epoch_ = epoch;
    }
    return *send_;
}

RecordCipher& NumberedRecords::opener(std::uint64_t number) {
    const std::uint64_t epoch = number / rekey_interval_;
    for (std::size_t i = 0; i < recv_.size(); ++i)
        if (recv_[i].cipher && recv_[i].epoch == epoch) {
            recv_last_ = i;
            return *recv_[i].cipher;
        }
    recv_last_ = 1 - recv_last_;
    Opener& slot = recv_[recv_last_];
    slot.epoch = epoch;
    slot.cipher =
        std::make_unique<RecordCipher>(cipher_, subkey(recv_base_, records_purpose, epoch), never);
    return *slot.cipher;
}

std::uint64_t NumberedRecords::seal(std::uint64_t label, std::span<const std::uint8_t> plain,
                                    std::uint8_t* out) {
    const std::uint64_t number = next_++;
    const auto header = header_of(label, number);
    std::uint8_t* trailer = out + plain.size();
    sealer(number).seal_numbered(
        number, header, plain, out,
        std::span<std::uint8_t, record_tag_size>(trailer + 8, record_tag_size));
    std::memcpy(trailer, &number, 8);
    ++sealed_;
    return number;
}

bool NumberedRecords::seen(std::uint64_t number) const {
    if (!any_opened_ || number > highest_) return false;
    if (highest_ - number >= window) return true;  // too late: taken as seen
    const std::uint64_t bit = number % window;
    return (opened_bits_[bit / 64] >> (bit % 64) & 1) != 0;
}

void NumberedRecords::mark(std::uint64_t number) {
    if (!any_opened_ || number > highest_) {
        // The window moves up: the numbers it leaves behind free their bits for new ones.
        if (!any_opened_ || number - highest_ >= window) {
            opened_bits_.fill(0);
        } else {
            for (std::uint64_t n = highest_ + 1; n < number; ++n) {
                const std::uint64_t bit = n % window;
                opened_bits_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
            }
        }
        any_opened_ = true;
        highest_ = number;
    }
    const std::uint64_t bit = number % window;
    opened_bits_[bit / 64] |= std::uint64_t{1} << (bit % 64);
}

std::optional<std::size_t> NumberedRecords::open(std::uint64_t label, std::uint8_t* record,
                                                 std::size_t size, std::uint64_t& number) {
    if (size < trailer_size) return std::nullopt;
    const std::size_t plain = size - trailer_size;
    std::memcpy(&number, record + plain, 8);
    if (seen(number)) {
        sodium_memzero(record, size);
        return std::nullopt;
    }
    const auto header = header_of(label, number);
    if (!opener(number).open_numbered(
            number, header, {record, plain},
            std::span<const std::uint8_t, record_tag_size>(record + plain + 8, record_tag_size)))
        return std::nullopt;
    // Marked only once it proved genuine: a forged number takes no place in the window.
    mark(number);
    ++opened_;
    return plain;
}

DirectionKey NumberedRecords::send_bulk_key(std::uint64_t number) const {
    return subkey(send_base_, bulk_purpose, number);
}

DirectionKey NumberedRecords::recv_bulk_key(std::uint64_t number) const {
    return subkey(recv_base_, bulk_purpose, number);
}

}  // namespace bmi::support::keys
