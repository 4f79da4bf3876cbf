// SPDX-License-Identifier: LGPL-2.1-or-later
// The part of the keyed handshake that every method shares (doc/security.md): what a proof is
// bound to, and the nonces of our own handshakes that are still open. A method keeps only the
// encoding of its hello messages and the order in which it sends them.
//
// A proof binds what each side knows first-hand, never only what the other side states: the
// acceptor's transport address as the initiator's socket reached it and as the acceptor's socket
// was reached. A keyed instance that dials an endpoint someone else holds therefore never
// accepts a proof that its own listener (or another key holder) made for a different socket.
#pragma once

#include <sys/socket.h>

#include <set>
#include <string>
#include <string_view>

#include "support/keys/key_proof.hpp"

namespace bmi::method::kit {

using support::keys::Nonce;
using support::keys::Role;

// Text of a socket address as both ends of a connection agree on it: "ip:port", "[ip6]:port"
// (an IPv4-mapped IPv6 address as plain IPv4, no scope id), a unix socket's path ('@' for the
// abstract namespace). "" for anything else.
std::string endpoint_text(const sockaddr* address, socklen_t length);

// The acceptor's end of connected socket fd, seen from our side: the address we connected to
// (initiator) or the address we were reached at (acceptor). "" if the socket cannot say.
std::string acceptor_endpoint(int fd, Role our_role);

// Everything one keyed handshake binds into its proofs.
struct KeyExchange {
    Nonce initiator_nonce{};
    Nonce acceptor_nonce{};
    std::string acceptor_endpoint;  // first-hand, from acceptor_endpoint()
    std::string acceptor_stated;    // what the acceptor says of itself in its answer
    std::string initiator_stated;   // what the initiator announces: a name it may be bound to
    support::keys::PublicKey initiator_public{};  // zero without encryption
    support::keys::PublicKey acceptor_public{};
    std::uint8_t cipher_offer = 0;   // the initiator's cipher bits
    std::uint8_t cipher_choice = 0;  // the acceptor's: one bit, or 0 for plain traffic
    std::string terms;               // Transcript::terms: both sides' stated limits, or ""

    support::keys::Transcript transcript(std::string_view plane) const;
};

// The nonces of our outbound handshakes that have not finished. An inbound hello that carries
// one is our own handshake reflected back at us: nobody else can know the nonce.
class NoncesInFlight {
public:
    // Holds one nonce in the set until it is destroyed or released.
    class Claim {
    public:
        Claim() = default;
        Claim(Claim&& other) noexcept;
        Claim& operator=(Claim&& other) noexcept;
        Claim(const Claim&) = delete;
        Claim& operator=(const Claim&) = delete;
        ~Claim() { release(); }

        const Nonce& nonce() const { return nonce_; }
        void release();

    private:
        friend class NoncesInFlight;
        NoncesInFlight* owner_ = nullptr;
        Nonce nonce_{};
    };

    NoncesInFlight() = default;
    NoncesInFlight(const NoncesInFlight&) = delete;
    NoncesInFlight& operator=(const NoncesInFlight&) = delete;

    // A fresh nonce for a handshake we start, held until the claim goes.
    Claim claim();
    bool ours(const Nonce& nonce) const { return open_.count(nonce) != 0; }
    std::size_t size() const { return open_.size(); }

private:
    std::set<Nonce> open_;
};

}  // namespace bmi::method::kit
