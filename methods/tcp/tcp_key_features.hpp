// SPDX-License-Identifier: LGPL-2.1-or-later
// The key bits of a HELLO or HELLO_ACK as the kit reads them, and ours as the wire writes them.
#pragma once

#include <cstdint>

#include "methods/kit/key_handshake.hpp"
#include "methods/tcp/tcp_wire.hpp"

namespace bmi::method::tcp {

// A keyed peer without feature_key_ciphers proves a transcript without the cipher fields: it
// counts as one of an older handshake (Refusal::first_handshake), refused before any proof.
inline kit::KeyFeatures key_features(const Hello& hello) {
    const std::uint64_t features = hello.features;
    return {(features & feature_key_proof) != 0,
            (features & feature_key_binding) != 0 && (features & feature_key_ciphers) != 0,
            (features & feature_key_required) != 0, hello.ciphers};
}

inline std::uint64_t feature_bits(kit::KeyFeatures offered) {
    return offered.proof ? feature_key_proof | feature_key_binding | feature_key_ciphers : 0;
}

}  // namespace bmi::method::tcp
