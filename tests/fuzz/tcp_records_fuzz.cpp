// SPDX-License-Identifier: LGPL-2.1-or-later
// The input side of tcp's record layer (tcp_records.hpp) as a connection reads it: a stream
// from a socket. The first byte picks how many well-formed records the harness seals ahead of
// the fuzzer's bytes (0..3), how the receive is cut into pieces and, its top bit clear, that it
// is a receive's buffer large records may be read into (RecordLayer::read's into_receive;
// small pieces take them through the input buffer all the same); the next two give those
// records' plaintext length; the rest follows them on the wire as it is.
// Properties: every byte delivered is plaintext the harness sealed, in order (nothing that
// did not authenticate reaches a receive); no read returns more than it was given room for;
// the stream ends in an error (the end, or -BMI_EPROTO for what follows the valid records),
// within a bounded number of reads.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "bmi-types.h"
#include "methods/tcp/tcp_records.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::tcp;
namespace keys = bmi::support::keys;

namespace {

keys::TrafficKeys fixed_keys() {
    keys::TrafficKeys k;
    k.cipher = keys::Cipher::chacha20poly1305;  // runs on every CPU
    for (std::size_t i = 0; i < k.initiator_to_acceptor.key.size(); ++i) {
        k.initiator_to_acceptor.key[i] = static_cast<std::uint8_t>(i);
        k.acceptor_to_initiator.key[i] = static_cast<std::uint8_t>(i * 3);
    }
    return k;
}

struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fd) != 0)
            fd[0] = fd[1] = -1;
    }
    ~SocketPair() {
        for (int f : fd)
            if (f >= 0) close(f);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const std::uint8_t choice = in.byte();
    const std::size_t valid = choice & 3;
    constexpr std::array<std::size_t, 6> piece_sizes{1, 24, 4096, 5000, 65536, 70000};
    const std::size_t piece = piece_sizes[(choice >> 2) % piece_sizes.size()];
    const bool into_receive = (choice & 0x80) == 0;
    const std::size_t length = 1 + in.object<std::uint16_t>();  // 1 .. record_plain_limit
    const auto raw = in.rest();
    // All of it must fit in the socket at once: the harness writes before it reads.
    if (valid * (length + 20) + raw.size() > 128 * 1024) return 0;

    SocketPair pair;
    FUZZ_CHECK(pair.fd[0] >= 0);
    const keys::TrafficKeys k = fixed_keys();
    RecordLayer sender(k, true, 2);  // rekey every other record: the key steps are read too
    RecordLayer receiver(k, false, 2);

    std::vector<std::uint8_t> plain(valid * length);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint8_t>(i * 13 + 5);
    for (std::size_t r = 0; r < valid; ++r) {
        const iovec one{plain.data() + r * length, length};
        if (sender.write(pair.fd[0], &one, 1) != static_cast<ssize_t>(length)) return 0;
        if (sender.pending_out()) return 0;
    }
    if (!raw.empty() &&
        send(pair.fd[0], raw.data(), raw.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(raw.size()))
        return 0;
    shutdown(pair.fd[0], SHUT_WR);

    std::vector<std::uint8_t> got(plain.size() + raw.size() + record_plain_limit);
    std::size_t have = 0;
    int error = 0;
    for (int reads = 0;; ++reads) {
        FUZZ_CHECK(reads < 1'000'000);
        std::array<iovec, 4> iov{};
        std::size_t room = 0;
        int count = 0;
        for (; count < static_cast<int>(iov.size()) && have + room < got.size(); ++count) {
            const std::size_t len = std::min(piece, got.size() - have - room);
            iov[count] = {got.data() + have + room, len};
            room += len;
        }
        const ssize_t n = receiver.read(pair.fd[1], iov.data(), count, false, error, into_receive);
        if (n < 0) {
            if (error != 0) break;
            continue;  // nothing whole yet; the socket still holds the rest
        }
        FUZZ_CHECK(static_cast<std::size_t>(n) <= room);
        have += static_cast<std::size_t>(n);
        FUZZ_CHECK(have <= plain.size());
        if (have == got.size()) break;
    }
    FUZZ_CHECK(have == 0 || std::memcmp(got.data(), plain.data(), have) == 0);
    if (raw.empty()) {
        FUZZ_CHECK(have == plain.size());
        FUZZ_CHECK(error == -BMI_ECONNRESET);
    } else {
        FUZZ_CHECK(error == -BMI_EPROTO || error == -BMI_ECONNRESET);
    }
    return 0;
}
