// SPDX-License-Identifier: LGPL-2.1-or-later
// tcp frame headers as a connection reads them: OrangeFS's 24 bytes, the standalone 25, the
// libbmi v2 32 and the HELLO frames, in each dialect a connection can be in (the upgrade
// offer's two among them). The first byte
// picks the dialect and the unexpected limit; the rest is what the peer sent.
// Properties: the size asked for never exceeds max_header_size and is what the framing decodes;
// a header check_header accepts is exactly what encode_header writes for it (so nothing a
// sender cannot produce is believed); an accepted size is within the dialect's bounds.
#include <array>

#include "methods/tcp/tcp_wire.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::tcp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const std::uint8_t choice = in.byte();
    const auto dialect = static_cast<Dialect>(choice % 8);
    constexpr std::array<bmi_size_t, 4> limits{0, 1, default_unexpected_limit, v2_eager_limit};
    const bmi_size_t limit = limits[(choice >> 4) % limits.size()];
    const auto wire = in.rest();

    // Read as the connection does: ask, read that much, ask again until the answer holds.
    std::size_t have = 0;
    for (int round = 0;; ++round) {
        FUZZ_CHECK(round < 4);
        std::size_t need = header_bytes_needed(dialect, wire.first(have));
        FUZZ_CHECK(need >= legacy_header_size && need <= max_header_size);
        if (need > wire.size()) return 0;  // the peer has not sent a whole header yet
        if (need == have) break;
        have = need;
    }
    const Framing framing = framing_of(dialect, wire.first(have));
    FUZZ_CHECK(header_size(framing) == have);
    const Header h = decode_header(wire.data(), framing);
    if (check_header(h, dialect, limit) != 0) return 0;

    std::array<std::uint8_t, max_header_size> again{};
    FUZZ_CHECK(encode_header(h, framing, again.data()) == have);
    FUZZ_CHECK(std::memcmp(again.data(), wire.data(), have) == 0);
    if (h.mode == Mode::unexpected) FUZZ_CHECK(h.size <= static_cast<std::uint64_t>(limit));
    if (h.mode == Mode::hello || h.mode == Mode::hello_ack)
        FUZZ_CHECK(h.size >= hello_fixed_size && h.size <= hello_max_body);
    // Between an offer and its HELLO a connection takes OrangeFS frames and the one
    // handshake frame of its side, under HELLO's magic only.
    if (dialect == Dialect::offering || dialect == Dialect::await_hello) {
        FUZZ_CHECK(framing == Framing::orangefs);
        if (h.magic != wire_magic)
            FUZZ_CHECK(h.magic == hello_magic &&
                       h.mode == (dialect == Dialect::offering ? Mode::hello_ack : Mode::hello));
    }
    return 0;
}
