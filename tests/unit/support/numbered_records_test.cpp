// SPDX-License-Identifier: LGPL-2.1-or-later
// Numbered records (support/keys/numbered_records.hpp), as ofi uses them: each opens once, in
// any order within the window, under the label it was sealed with; a changed byte, label or
// number, a repeat and a record from far behind fail; the keys step every rekey interval
// without a message; a large message's key is its record's and the other side's alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/keys/numbered_records.hpp"
#include "support/keys/sealed_bulk.hpp"

using namespace bmi::support::keys;

namespace {

TrafficKeys keys_for(Cipher cipher) {
    TrafficKeys keys;
    keys.cipher = cipher;
    keys.initiator_to_acceptor.key.fill(0x11);
    keys.initiator_to_acceptor.iv.fill(0x22);
    keys.acceptor_to_initiator.key.fill(0x33);
    keys.acceptor_to_initiator.iv.fill(0x44);
    return keys;
}

Cipher some_cipher() {
    return cipher_available(Cipher::aes256gcm) ? Cipher::aes256gcm : Cipher::chacha20poly1305;
}

std::vector<std::uint8_t> seal(NumberedRecords& from, std::uint64_t label,
                               const std::string& text) {
    std::vector<std::uint8_t> record(text.size() + NumberedRecords::trailer_size);
    std::memcpy(record.data(), text.data(), text.size());
    from.seal(label, {record.data(), text.size()}, record.data());
    return record;
}

// The plaintext, or "FAILED".
std::string open(NumberedRecords& at, std::uint64_t label, std::vector<std::uint8_t> record) {
    std::uint64_t number = 0;
    const auto size = at.open(label, record.data(), record.size(), number);
    if (!size) return "FAILED";
    return {reinterpret_cast<const char*>(record.data()), *size};
}

}  // namespace

TEST_CASE("numbered records open once each, in any order within the window") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 1 << 20);
    NumberedRecords server(keys, false, 1 << 20);
    const auto first = seal(client, 7, "first");
    const auto second = seal(client, 8, "second");
    const auto third = seal(client, 9, "third");
    CHECK(std::string(first.begin(), first.begin() + 5) != "first");  // sealed, not plain
    CHECK(open(server, 9, third) == "third");
    CHECK(open(server, 7, first) == "first");
    CHECK(open(server, 7, first) == "FAILED");  // repeated
    CHECK(open(server, 8, second) == "second");
    CHECK(server.opened() == 3);

    // The other direction has its own keys: our own records do not open here.
    const auto mine = seal(server, 1, "answer");
    CHECK(open(server, 1, mine) == "FAILED");
    CHECK(open(client, 1, mine) == "answer");
}

TEST_CASE("a changed byte, label, number or length fails") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 1 << 20);
    NumberedRecords server(keys, false, 1 << 20);
    auto record = seal(client, 5, "payload");
    SECTION("ciphertext") {
        record[2] ^= 1;
        CHECK(open(server, 5, record) == "FAILED");
    }
    SECTION("label: another tag, or other credits in it") {
        CHECK(open(server, 6, record) == "FAILED");
    }
    SECTION("number") {
        record[record.size() - NumberedRecords::trailer_size] ^= 1;
        CHECK(open(server, 5, record) == "FAILED");
    }
    SECTION("tag") {
        record.back() ^= 0x80;
        CHECK(open(server, 5, record) == "FAILED");
    }
    SECTION("cut") {
        record.erase(record.begin());
        CHECK(open(server, 5, record) == "FAILED");
        CHECK(open(server, 5, std::vector<std::uint8_t>(10)) == "FAILED");
    }
    // A failure takes no number: the genuine record still opens after a forged one.
    CHECK(open(server, 5, seal(client, 5, "next")) == "next");
}

TEST_CASE("a record from further behind than the window fails; the window moves up") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 1 << 20);
    NumberedRecords server(keys, false, 1 << 20);
    const auto old = seal(client, 1, "old");
    const auto kept = seal(client, 1, "kept");
    for (std::uint64_t i = 2; i < NumberedRecords::window; ++i) seal(client, 1, "skipped");
    // Number `window`: the first record (0) is now a whole window behind, the second not.
    CHECK(open(server, 1, seal(client, 1, "newest")) == "newest");
    CHECK(open(server, 1, old) == "FAILED");
    CHECK(open(server, 1, kept) == "kept");
}

TEST_CASE("keys step every rekey interval, out of order across the step too") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 2);
    NumberedRecords server(keys, false, 2);
    NumberedRecords one_key(keys, false, 1 << 20);
    std::vector<std::vector<std::uint8_t>> records;
    for (int i = 0; i < 7; ++i) records.push_back(seal(client, 3, "r" + std::to_string(i)));
    // Numbers 0-1 under the first key, 2-3 the second, ...: a receiver that never steps opens
    // only the first two.
    CHECK(open(one_key, 3, records[0]) == "r0");
    CHECK(open(one_key, 3, records[2]) == "FAILED");
    for (int i : {1, 0, 4, 2, 3, 6, 5})
        CHECK(open(server, 3, records[i]) == "r" + std::to_string(i));
}

TEST_CASE("a large message's key is named by its record and known to its receiver alone") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 1 << 20);
    NumberedRecords server(keys, false, 1 << 20);
    std::vector<std::uint8_t> data(3 * bulk_chunk + 5);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
    const std::span<const std::uint8_t> pieces[] = {data};
    std::vector<std::uint8_t> sealed(sealed_size(data.size()));
    seal_bulk(client.cipher(), client.send_bulk_key(41), 41, pieces, data.size(), sealed.data());

    auto copy = sealed;
    CHECK_FALSE(open_bulk(server.cipher(), server.recv_bulk_key(42), 41, copy.data(), data.size()));
    copy = sealed;
    CHECK_FALSE(open_bulk(client.cipher(), client.recv_bulk_key(41), 41, copy.data(), data.size()));
    copy = sealed;
    REQUIRE(open_bulk(server.cipher(), server.recv_bulk_key(41), 41, copy.data(), data.size()));
    std::vector<std::uint8_t> back(data.size());
    for_each_opened_chunk(copy.data(), data.size(),
                          [&](std::span<const std::uint8_t> chunk, std::uint64_t offset) {
                              std::memcpy(back.data() + offset, chunk.data(), chunk.size());
                          });
    CHECK(back == data);
}

TEST_CASE("a large message's chunks seal and open one at a time, in any order") {
    const TrafficKeys keys = keys_for(some_cipher());
    NumberedRecords client(keys, true, 1 << 20);
    NumberedRecords server(keys, false, 1 << 20);
    std::vector<std::uint8_t> data(3 * bulk_chunk + 5);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 13);
    // Cut across a chunk's boundary: seal_bulk gathers that chunk before sealing it.
    const std::span<const std::uint8_t> pieces[] = {
        {data.data(), bulk_chunk + 100},
        {data.data() + bulk_chunk + 100, data.size() - bulk_chunk - 100}};
    std::vector<std::uint8_t> whole(sealed_size(data.size()));
    seal_bulk(client.cipher(), client.send_bulk_key(7), 7, pieces, data.size(), whole.data());

    // Chunk by chunk, last first, from the plaintext: the same bytes on the wire.
    SealedBulk sealer(client.cipher(), client.send_bulk_key(7), 7, data.size());
    REQUIRE(sealer.chunks() == 4);
    CHECK(sealer.plain_size(3) == 5);
    std::vector<std::uint8_t> sealed(whole.size());
    for (std::uint64_t index : {3, 1, 0, 2})
        sealer.seal(index, data.data() + SealedBulk::plain_offset(index), sealed.data());
    CHECK(sealed == whole);

    SECTION("each opens alone, in any order, in place or into another buffer") {
        SealedBulk opener(server.cipher(), server.recv_bulk_key(7), 7, data.size());
        std::vector<std::uint8_t> out(bulk_chunk);
        REQUIRE(opener.open(1, sealed.data(), out.data()));
        CHECK(std::memcmp(out.data(), data.data() + bulk_chunk, bulk_chunk) == 0);
        for (std::uint64_t index : {2, 0, 3, 1}) {
            REQUIRE(opener.open(index, sealed.data()));
            CHECK(std::memcmp(sealed.data() + SealedBulk::sealed_offset(index),
                              data.data() + SealedBulk::plain_offset(index),
                              opener.plain_size(index)) == 0);
        }
    }
    SECTION("a changed chunk fails alone, and a chunk moved to another place fails") {
        sealed[SealedBulk::sealed_offset(2) + 10] ^= 1;
        std::copy_n(whole.begin() + SealedBulk::sealed_offset(0), sealed_chunk,
                    sealed.begin() + SealedBulk::sealed_offset(1));
        SealedBulk opener(server.cipher(), server.recv_bulk_key(7), 7, data.size());
        CHECK_FALSE(opener.open(2, sealed.data()));
        std::vector<std::uint8_t> out(bulk_chunk, 0xab);
        CHECK_FALSE(opener.open(1, sealed.data(), out.data()));
        CHECK(std::count(out.begin(), out.end(), 0) == static_cast<long>(bulk_chunk));
        CHECK(opener.open(0, sealed.data()));
        CHECK(opener.open(3, sealed.data()));
    }
    SECTION("another total, as a cut message would claim, opens nothing") {
        SealedBulk opener(server.cipher(), server.recv_bulk_key(7), 7, data.size() - 1);
        CHECK_FALSE(opener.open(0, sealed.data()));
    }
}
