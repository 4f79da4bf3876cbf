// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/kit/key_exchange.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>

namespace bmi::method::kit {

namespace {

std::string ipv4_text(const in_addr& address, std::uint16_t port_network_order) {
    char host[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &address, host, sizeof host);
    return std::string(host) + ':' + std::to_string(ntohs(port_network_order));
}

}  // namespace

std::string endpoint_text(const sockaddr* address, socklen_t length) {
    if (address == nullptr) return {};
    if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(address);
        return ipv4_text(in->sin_addr, in->sin_port);
    }
    if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
        // A dual-stack listener sees an IPv4 client's target as ::ffff:a.b.c.d; the client
        // itself connected to a.b.c.d. The scope id names an interface of one side only.
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            in_addr v4;
            std::memcpy(&v4, in6->sin6_addr.s6_addr + 12, sizeof v4);
            return ipv4_text(v4, in6->sin6_port);
        }
        char host[INET6_ADDRSTRLEN] = {};
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return '[' + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
    }
    if (address->sa_family == AF_UNIX) {
        const auto* un = reinterpret_cast<const sockaddr_un*>(address);
        const std::size_t offset = offsetof(sockaddr_un, sun_path);
        if (static_cast<std::size_t>(length) <= offset) return {};
        std::string path(un->sun_path, static_cast<std::size_t>(length) - offset);
        if (!path.empty() && path.front() == '\0') {
            path.front() = '@';
            return path;
        }
        return path.substr(0, path.find('\0'));
    }
    return {};
}

std::string acceptor_endpoint(int fd, Role our_role) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    auto* raw = reinterpret_cast<sockaddr*>(&address);
    const int rc = our_role == Role::initiator ? getpeername(fd, raw, &length)
                                               : getsockname(fd, raw, &length);
    return rc == 0 ? endpoint_text(raw, length) : std::string();
}

support::keys::Transcript KeyExchange::transcript(std::string_view plane) const {
    support::keys::Transcript t;
    t.plane = plane;
    t.initiator_nonce = initiator_nonce;
    t.acceptor_nonce = acceptor_nonce;
    t.acceptor_endpoint = acceptor_endpoint;
    t.acceptor_address = acceptor_stated;
    t.initiator_address = initiator_stated;
    t.initiator_public = initiator_public;
    t.acceptor_public = acceptor_public;
    t.cipher_offer = cipher_offer;
    t.cipher_choice = cipher_choice;
    t.terms = terms;
    return t;
}

NoncesInFlight::Claim::Claim(Claim&& other) noexcept : owner_(other.owner_), nonce_(other.nonce_) {
    other.owner_ = nullptr;
}

NoncesInFlight::Claim& NoncesInFlight::Claim::operator=(Claim&& other) noexcept {
    if (this != &other) {
        release();
        owner_ = other.owner_;
        nonce_ = other.nonce_;
        other.owner_ = nullptr;
    }
    return *this;
}

void NoncesInFlight::Claim::release() {
    if (owner_ != nullptr) owner_->open_.erase(nonce_);
    owner_ = nullptr;
}

NoncesInFlight::Claim NoncesInFlight::claim() {
    Claim c;
    // 256 random bits never repeat in practice; the loop only keeps the set's invariant exact.
    do {
        c.nonce_ = support::keys::fresh_nonce();
    } while (!open_.insert(c.nonce_).second);
    c.owner_ = this;
    return c;
}

}  // namespace bmi::method::kit
