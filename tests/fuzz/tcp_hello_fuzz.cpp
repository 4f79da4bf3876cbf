// SPDX-License-Identifier: LGPL-2.1-or-later
// The tcp handshake bodies: a HELLO or HELLO_ACK body (features, address, nonce, the cipher
// fields with feature_key_ciphers, optional proof, a same-node offer with feature_same_node),
// as decode_hello_body reads it once
// check_header has bounded its length.
// Properties: a body is accepted only at a length check_header allows; what is accepted is
// exactly what encode_hello writes for the decoded value, so a peer cannot make us believe an
// address or proof the encoder could not have sent.
#include "methods/tcp/tcp_wire.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::tcp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const bool ack = (in.byte() & 1) != 0;
    const auto body = in.rest();
    const auto hello = decode_hello_body(body);
    if (!hello) return 0;

    Header h;
    h.magic = hello_magic;
    h.mode = ack ? Mode::hello_ack : Mode::hello;
    h.size = body.size();
    FUZZ_CHECK(check_header(h, ack ? Dialect::await_ack : Dialect::first_inbound,
                            default_unexpected_limit) == 0);
    FUZZ_CHECK(hello->address.size() <= BMI_MAX_ADDR_LEN);
    const bool ciphered = (hello->features & feature_key_ciphers) != 0;
    FUZZ_CHECK(!ciphered || (hello->features & feature_key_proof) != 0);
    FUZZ_CHECK(ciphered ||
               (hello->ciphers == 0 && hello->public_key == bmi::support::keys::PublicKey{}));
    const std::size_t plain = hello_fixed_size + hello->address.size() +
                              (ciphered ? hello_cipher_size : 0);
    // A same-node offer comes last, and only with its bit.
    const std::size_t offer_len = hello->offer ? same_node_offer_size : 0;
    FUZZ_CHECK(!hello->offer || (hello->features & feature_same_node) != 0);
    FUZZ_CHECK(!hello->offer || (!hello->offer->shm_name.empty() &&
                                 hello->offer->shm_name.size() <= same_node_name_room));
    FUZZ_CHECK(hello->proof.has_value() ==
               ((hello->features & feature_key_proof) != 0 && body.size() > plain + offer_len));

    const auto frame = encode_hello(*hello, ack);
    FUZZ_CHECK(frame.size() == legacy_header_size + body.size());
    FUZZ_CHECK(std::memcmp(frame.data() + legacy_header_size, body.data(), body.size()) == 0);
    const auto again = decode_hello_body({frame.data() + legacy_header_size, body.size()});
    FUZZ_CHECK(again && again->address == hello->address && again->nonce == hello->nonce &&
               again->proof == hello->proof && again->features == hello->features &&
               again->ciphers == hello->ciphers && again->public_key == hello->public_key &&
               again->offer == hello->offer);
    return 0;
}
