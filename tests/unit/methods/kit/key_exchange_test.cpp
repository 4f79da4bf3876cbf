// SPDX-License-Identifier: LGPL-2.1-or-later
// The kit's key exchange: the endpoint text both ends of a real socket agree on, and the
// nonces of our own handshakes that an inbound hello must not carry.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "methods/kit/key_exchange.hpp"

using namespace bmi::method::kit;

namespace {

// A connected pair over a real listener of `family` on loopback: {initiator, acceptor}.
struct Connected {
    int listener = -1;
    int initiator = -1;
    int acceptor = -1;
    explicit Connected(int family) {
        sockaddr_storage address{};
        socklen_t length = 0;
        if (family == AF_INET) {
            auto* in = reinterpret_cast<sockaddr_in*>(&address);
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            length = sizeof *in;
        } else {
            auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
            in6->sin6_family = AF_INET6;
            in6->sin6_addr = in6addr_loopback;
            length = sizeof *in6;
        }
        listener = socket(family, SOCK_STREAM, 0);
        REQUIRE(listener >= 0);
        if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0) return;
        REQUIRE(listen(listener, 1) == 0);
        REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        initiator = socket(family, SOCK_STREAM, 0);
        REQUIRE(connect(initiator, reinterpret_cast<sockaddr*>(&address), length) == 0);
        acceptor = accept(listener, nullptr, nullptr);
        REQUIRE(acceptor >= 0);
    }
    ~Connected() {
        for (int fd : {listener, initiator, acceptor})
            if (fd >= 0) close(fd);
    }
};

std::string listener_port(int fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return std::to_string(ntohs(in->sin_port));
}

}  // namespace

TEST_CASE("kit: both ends of a tcp connection name the acceptor's endpoint alike", "[kit]") {
    Connected ipv4(AF_INET);
    REQUIRE(ipv4.acceptor >= 0);
    const std::string seen_by_initiator = acceptor_endpoint(ipv4.initiator, Role::initiator);
    CHECK(seen_by_initiator == "127.0.0.1:" + listener_port(ipv4.listener));
    CHECK(acceptor_endpoint(ipv4.acceptor, Role::acceptor) == seen_by_initiator);
    // The initiator's own end is another endpoint: a proof made there fails here.
    CHECK(acceptor_endpoint(ipv4.initiator, Role::acceptor) != seen_by_initiator);

    Connected ipv6(AF_INET6);
    if (ipv6.acceptor < 0) return;  // no IPv6 loopback here
    const std::string v6 = acceptor_endpoint(ipv6.initiator, Role::initiator);
    CHECK(v6.rfind("[::1]:", 0) == 0);
    CHECK(acceptor_endpoint(ipv6.acceptor, Role::acceptor) == v6);
}

TEST_CASE("kit: endpoint text drops what only one side sees", "[kit]") {
    auto ipv6 = [](const char* text, std::uint16_t port, std::uint32_t scope) {
        sockaddr_in6 address{};
        address.sin6_family = AF_INET6;
        address.sin6_port = htons(port);
        address.sin6_scope_id = scope;
        REQUIRE(inet_pton(AF_INET6, text, &address.sin6_addr) == 1);
        return endpoint_text(reinterpret_cast<sockaddr*>(&address), sizeof address);
    };
    CHECK(ipv6("::ffff:10.1.2.3", 3334, 7) == "10.1.2.3:3334");
    CHECK(ipv6("fe80::1", 9, 3) == "[fe80::1]:9");

    sockaddr_un abstract{};
    abstract.sun_family = AF_UNIX;
    std::memcpy(abstract.sun_path, "\0bmi-x", 6);
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 6);
    CHECK(endpoint_text(reinterpret_cast<sockaddr*>(&abstract), length) == "@bmi-x");

    CHECK(endpoint_text(nullptr, 0).empty());
    sockaddr_in truncated{};
    truncated.sin_family = AF_INET;
    CHECK(endpoint_text(reinterpret_cast<sockaddr*>(&truncated), 4).empty());
    CHECK(acceptor_endpoint(-1, Role::initiator).empty());
}

TEST_CASE("kit: a nonce is ours exactly while its claim lives", "[kit]") {
    NoncesInFlight open;
    Nonce first{};
    {
        NoncesInFlight::Claim a = open.claim();
        first = a.nonce();
        CHECK(open.ours(first));
        NoncesInFlight::Claim b = open.claim();
        CHECK(b.nonce() != first);
        CHECK(open.size() == 2);
        // Moving a claim keeps the nonce held once; the moved-from claim releases nothing.
        NoncesInFlight::Claim moved = std::move(a);
        a.release();
        CHECK(open.ours(first));
        b.release();
        CHECK(open.size() == 1);
        b.release();  // twice is harmless
        moved = open.claim();  // assigning over a claim gives its nonce up
        CHECK_FALSE(open.ours(first));
        CHECK(open.size() == 1);
    }
    CHECK(open.size() == 0);
    Nonce stranger{};
    stranger[0] = 1;
    CHECK_FALSE(open.ours(stranger));
}
