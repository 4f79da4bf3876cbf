// SPDX-License-Identifier: LGPL-2.1-or-later
// tcp's record layer on a real socket pair, the bytes of each record trickled in: a large
// record a receive takes whole is read into it across many reads and opened there; one damaged
// on the way is wiped from the receive; a record cut short owes input (the stall clock runs).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "bmi-types.h"
#include "methods/tcp/tcp_records.hpp"

using namespace bmi::method::tcp;
namespace keys = bmi::support::keys;

namespace {

keys::TrafficKeys test_keys() {
    keys::TrafficKeys k;
    k.cipher = keys::Cipher::chacha20poly1305;
    k.initiator_to_acceptor.key.fill(7);
    k.acceptor_to_initiator.key.fill(9);
    return k;
}

struct Sockets {
    int fd[2] = {-1, -1};
    Sockets() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd) == 0); }
    ~Sockets() {
        close(fd[0]);
        close(fd[1]);
    }
};

// What a RecordLayer writes for `plain`: the records' bytes as they go on the wire.
std::vector<std::uint8_t> sealed(const keys::TrafficKeys& k,
                                 const std::vector<std::uint8_t>& plain) {
    Sockets s;
    RecordLayer sender(k, true, 1u << 20);
    std::vector<std::uint8_t> wire;
    std::size_t done = 0;
    while (done < plain.size()) {
        const iovec rest{const_cast<std::uint8_t*>(plain.data()) + done, plain.size() - done};
        const ssize_t n = sender.write(s.fd[0], &rest, 1);
        REQUIRE(n >= 0);
        done += static_cast<std::size_t>(n);
        while (sender.pending_out() || n > 0) {
            std::uint8_t buffer[65536];
            const ssize_t got = recv(s.fd[1], buffer, sizeof buffer, 0);
            if (got <= 0) break;
            wire.insert(wire.end(), buffer, buffer + got);
            if (sender.pending_out()) REQUIRE(sender.flush(s.fd[0]) >= 0);
        }
    }
    return wire;
}

}  // namespace

TEST_CASE("large records trickled in are read into the receive and opened there", "[tcp]") {
    const keys::TrafficKeys k = test_keys();
    std::vector<std::uint8_t> plain(3 * 65536 + 5000);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint8_t>(i * 31);
    auto wire = sealed(k, plain);
    REQUIRE(wire.size() == plain.size() + 4 * (4 + 16));  // four records, each its own

    const bool damage = GENERATE(false, true);
    CAPTURE(damage);
    if (damage) wire[wire.size() / 2] ^= 1;  // inside the second record

    Sockets s;
    RecordLayer receiver(k, false, 1u << 20);
    std::vector<std::uint8_t> into(plain.size(), 0);
    std::size_t have = 0;
    int error = 0;
    bool owed_mid_record = false;
    for (std::size_t sent = 0; sent < wire.size() && error == 0;) {
        const std::size_t piece = std::min<std::size_t>(1000, wire.size() - sent);
        REQUIRE(send(s.fd[0], wire.data() + sent, piece, 0) == static_cast<ssize_t>(piece));
        sent += piece;
        const iovec rest{into.data() + have, into.size() - have};
        const ssize_t n = receiver.read(s.fd[1], &rest, 1, false, error, true);
        if (n > 0) have += static_cast<std::size_t>(n);
        owed_mid_record = owed_mid_record || receiver.owes_input();
    }
    CHECK(owed_mid_record);
    if (!damage) {
        CHECK(error == 0);
        CHECK(have == plain.size());
        CHECK(into == plain);
        CHECK_FALSE(receiver.owes_input());
    } else {
        CHECK(error == -BMI_EPROTO);
        CHECK(have == 65536);  // the first record only
        CHECK(std::equal(plain.begin(), plain.begin() + 65536, into.begin()));
        CHECK(std::all_of(into.begin() + 65536, into.end(), [](std::uint8_t b) { return b == 0; }));
    }
}

TEST_CASE("half a small record owes input; the whole record does not", "[tcp]") {
    const keys::TrafficKeys k = test_keys();
    const std::vector<std::uint8_t> plain(100, 0x5a);
    const auto wire = sealed(k, plain);
    Sockets s;
    RecordLayer receiver(k, false, 1u << 20);
    std::vector<std::uint8_t> into(32);
    int error = 0;
    const iovec iov{into.data(), into.size()};
    REQUIRE(send(s.fd[0], wire.data(), wire.size() / 2, 0) > 0);
    CHECK(receiver.read(s.fd[1], &iov, 1, false, error) == -1);
    CHECK(error == 0);
    CHECK(receiver.owes_input());
    REQUIRE(send(s.fd[0], wire.data() + wire.size() / 2, wire.size() - wire.size() / 2, 0) > 0);
    CHECK(receiver.read(s.fd[1], &iov, 1, false, error) == 32);
    CHECK_FALSE(receiver.owes_input());  // the rest of its plaintext waits, nothing is owed
    CHECK(receiver.has_input());
}

// What TcpMethod does: a receive's buffer takes a large record directly, but once a read
// returned some bytes, the rest of the receive, now shorter than its read-ahead size, is read
// through a buffer of its own. A record begun in the receive by that read would be lost.
TEST_CASE("a read that returns bytes starts no record in the receive", "[tcp]") {
    const keys::TrafficKeys k = test_keys();
    std::vector<std::uint8_t> small(100), large(8192);
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::uint8_t>(i * 3);
    for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<std::uint8_t>(i * 5);
    Sockets s;
    RecordLayer sender(k, true, 1u << 20);
    // One record for the small piece, one of its own for the large one.
    const iovec pieces[2] = {{small.data(), small.size()}, {large.data(), large.size()}};
    REQUIRE(sender.write(s.fd[0], pieces, 2) == static_cast<ssize_t>(small.size() + large.size()));
    REQUIRE_FALSE(sender.pending_out());
    std::vector<std::uint8_t> wire(small.size() + large.size() + 2 * (4 + 16));
    REQUIRE(recv(s.fd[1], wire.data(), wire.size(), MSG_WAITALL) ==
            static_cast<ssize_t>(wire.size()));

    // The small record and the start of the large one.
    const std::size_t first = 4 + small.size() + 16 + 1000;
    REQUIRE(send(s.fd[0], wire.data(), first, 0) == static_cast<ssize_t>(first));
    RecordLayer receiver(k, false, 1u << 20);
    std::vector<std::uint8_t> into(small.size() + large.size(), 0);
    int error = 0;
    const iovec whole{into.data(), into.size()};
    REQUIRE(receiver.read(s.fd[1], &whole, 1, false, error, true) ==
            static_cast<ssize_t>(small.size()));
    CHECK(std::equal(small.begin(), small.end(), into.begin()));

    // The rest comes, and is read through another buffer.
    REQUIRE(send(s.fd[0], wire.data() + first, wire.size() - first, 0) ==
            static_cast<ssize_t>(wire.size() - first));
    std::vector<std::uint8_t> elsewhere(large.size(), 0);
    const iovec other{elsewhere.data(), elsewhere.size()};
    CHECK(receiver.read(s.fd[1], &other, 1, false, error) == static_cast<ssize_t>(large.size()));
    CHECK(error == 0);
    CHECK(elsewhere == large);
}
