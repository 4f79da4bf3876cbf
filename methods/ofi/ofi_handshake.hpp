// SPDX-License-Identifier: LGPL-2.1-or-later
// The kit's key handshake (methods/kit/key_handshake.hpp) on the ofi wire: the hello, answer
// and proof bodies as a pure codec. Every field a peer sends is checked here, before the
// method looks at it.
//   hello   features(1) name_length(2) name [nonce(32)] [ciphers(1) public_key(32)]
//           [eager(4) unexpected(4)] stated...
//   answer  features(1) [nonce(32) proof(32)] [ciphers(1) public_key(32)]
//           [eager(4) unexpected(4)] stated...
//   proof   proof(32)
// features: 1 proof, 2 binding, 4 required (kit::KeyFeatures), 8 ciphers, 16 limits, 32 numbers;
// nonce and proof only with 1, the cipher fields only with 8 (a keyed libbmi sets both), the
// sizes only with 16 (libbmi always sends them). 32: the sender numbers its ordered messages
// (ofi_wire.hpp; libbmi always does). The hello's ciphers
// are the initiator's offer, the answer's the acceptor's choice (doc/security.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "methods/kit/key_handshake.hpp"
#include "support/keys/key_proof.hpp"
#include "support/keys/traffic_keys.hpp"

namespace bmi::method::ofi {

// The longest endpoint name and stated address a hello or answer may carry.
inline constexpr std::size_t max_name_bytes = 256;
inline constexpr std::size_t max_stated_bytes = 256;

// The largest eager and unexpected messages the sender's receive buffers take: a peer sends
// it none larger, whatever its own settings say (a larger one would not fit the buffer it
// lands in). Absent (an older libbmi): taken to be the receiver's own.
struct BufferLimits {
    std::uint32_t eager = 0;
    std::uint32_t unexpected = 0;
};

struct Hello {
    kit::KeyFeatures features;
    std::vector<std::byte> name;  // the initiator's endpoint, for the acceptor's address vector
    support::keys::Nonce nonce{};
    bool cipher_fields = false;  // features bit 8: ciphers and public_key were sent
    support::keys::PublicKey public_key{};
    std::optional<BufferLimits> limits;
    bool numbers = false;  // features bit 32
    std::string stated;    // the initiator's listen address, or ""
};

struct Answer {
    kit::KeyFeatures features;
    support::keys::Nonce nonce{};
    support::keys::Proof proof{};
    bool cipher_fields = false;
    support::keys::PublicKey public_key{};
    std::optional<BufferLimits> limits;
    bool numbers = false;  // features bit 32
    std::string stated;    // the acceptor's listen address
};

// What the kit's proof binds of a hello or answer beyond its nonces and keys: the stated
// address, the buffer limits and whether the sender numbers its messages, so that nobody on
// the path changes any of them unseen. The limits and the numbers flag go last in a fixed 10
// bytes, so that no stated text can pass for them.
std::string proven_text(const std::string& stated, const std::optional<BufferLimits>& limits,
                        bool numbers);

// The features the kit checks: a keyed peer without the cipher fields proves a transcript
// without them, so it counts as one of an older handshake (kit::Refusal::first_handshake).
kit::KeyFeatures checked_features(const kit::KeyFeatures& sent, bool cipher_fields);

std::vector<std::byte> encode(const Hello& hello);
std::vector<std::byte> encode(const Answer& answer);
std::optional<Hello> decode_hello(std::span<const std::byte> body);
std::optional<Answer> decode_answer(std::span<const std::byte> body);

}  // namespace bmi::method::ofi
