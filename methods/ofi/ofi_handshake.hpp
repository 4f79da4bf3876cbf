// SPDX-License-Identifier: LGPL-2.1-or-later
// The kit's key handshake (methods/kit/key_handshake.hpp) on the ofi wire: the hello, answer
// and proof bodies as a pure codec. Every field a peer sends is checked here, before the
// method looks at it.
//   hello   features(1) name_length(2) name [nonce(32)] [ciphers(1) public_key(32)]
//           [eager(4) unexpected(4)] stated...
//   answer  features(1) [nonce(32) proof(32)] [ciphers(1) public_key(32)]
//           [eager(4) unexpected(4)] stated...
//   proof   proof(32)
//   probe   nonce(32) name...
//   reset   nonce(32) proof(32)
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
// address, the buffer limits, whether the sender numbers its messages and, on shm, the
// sender's token (Fabric::token), so that nobody on the path changes any of them unseen. The
// limits, the numbers flag and the token go last in a fixed 10 bytes (18 on shm, where every
// endpoint has a token), so that no stated text can pass for them.
std::string proven_text(const std::string& stated, const std::optional<BufferLimits>& limits,
                        bool numbers, std::uint64_t token = 0);

// The features the kit checks: a keyed peer without the cipher fields proves a transcript
// without them, so it counts as one of an older handshake (kit::Refusal::first_handshake).
kit::KeyFeatures checked_features(const kit::KeyFeatures& sent, bool cipher_fields);

// A restarted peer (doc/methods/ofi.md, "Restarted peers"): rxm connects our messages to the
// new process beneath us, which drops them as from an endpoint that never said hello and
// cannot say so, since it is not told who sent them. So a probe, sent to a peer we looked up
// when a wait on it falls silent, names its sender; a peer that knows neither the sender nor its
// name answers with a reset. Neither is sealed nor carries credits or a number: the peer that
// answers shares no traffic keys with the prober.
struct Probe {
    support::keys::Nonce nonce{};
    std::vector<std::byte> name;  // the prober's endpoint, 1 to max_name_bytes bytes
};
// The probe's nonce, and the proof of the key over it (kit::KeyGate::prove_reset).
struct Reset {
    support::keys::Nonce nonce{};
    support::keys::Proof proof{};
};

std::vector<std::byte> encode(const Hello& hello);
std::vector<std::byte> encode(const Answer& answer);
std::optional<Hello> decode_hello(std::span<const std::byte> body);
std::optional<Answer> decode_answer(std::span<const std::byte> body);
std::vector<std::byte> encode(const Probe& probe);
std::vector<std::byte> encode(const Reset& reset);
std::optional<Probe> decode_probe(std::span<const std::byte> body);
std::optional<Reset> decode_reset(std::span<const std::byte> body);

}  // namespace bmi::method::ofi
