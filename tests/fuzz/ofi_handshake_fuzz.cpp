// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi handshake bodies (methods/ofi/ofi_handshake.hpp): a hello, an answer, a probe or a
// reset, as the method decodes what a receive buffer took from any source.
// Properties: what is accepted stays within its bounds and is exactly what encode writes for
// the decoded value, so a peer cannot make us believe a name, nonce or proof the encoder could
// not have sent.
#include <cstring>

#include "methods/ofi/ofi_handshake.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::ofi;

namespace {
template <class Decoded>
void check_round_trip(const Decoded& decoded, std::span<const std::byte> body) {
    const auto again = encode(decoded);
    FUZZ_CHECK(again.size() == body.size());
    FUZZ_CHECK(std::memcmp(again.data(), body.data(), body.size()) == 0);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const int which = in.byte() & 3;
    const auto rest = in.rest();
    const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(rest.data()),
                                          rest.size());
    if (which == 1) {
        if (auto decoded = decode_answer(body)) {
            FUZZ_CHECK(decoded->stated.size() <= max_stated_bytes);
            check_round_trip(*decoded, body);
        }
    } else if (which == 2) {
        if (auto decoded = decode_probe(body)) {
            FUZZ_CHECK(!decoded->name.empty() && decoded->name.size() <= max_name_bytes);
            check_round_trip(*decoded, body);
        }
    } else if (which == 3) {
        if (auto decoded = decode_reset(body)) check_round_trip(*decoded, body);
    } else if (auto decoded = decode_hello(body)) {
        FUZZ_CHECK(!decoded->name.empty() && decoded->name.size() <= max_name_bytes);
        FUZZ_CHECK(decoded->stated.size() <= max_stated_bytes);
        check_round_trip(*decoded, body);
    }
    return 0;
}
