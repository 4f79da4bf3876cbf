// SPDX-License-Identifier: LGPL-2.1-or-later
// tcp_source_ports: the setting's texts, the range a trusted-connection policy puts in force,
// and real binds on 127.0.0.1: highest port first, then downwards, ports in use skipped, and the
// kernel's port when none of the range can be had.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "bmi-types.h"
#include "methods/tcp/tcp_settings.hpp"
#include "methods/tcp/tcp_source_ports.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/settings/settings.hpp"

using bmi::method::tcp::parse_source_ports;
using bmi::method::tcp::PortRange;
using bmi::method::tcp::SocketAddress;
using bmi::method::tcp::SourcePorts;
using bmi::method::tcp::SourcePortSetting;
using Mode = SourcePortSetting::Mode;

namespace {

SourcePortSetting parsed(const char* text) {
    SourcePortSetting out;
    std::string why;
    REQUIRE(parse_source_ports(text, out, why) == 0);
    return out;
}

SocketAddress loopback(std::uint16_t port) {
    SocketAddress out;
    REQUIRE(bmi::method::tcp::resolve_literal("127.0.0.1", port, out) == 0);
    return out;
}

struct Socket {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Socket() = default;
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket() { close(fd); }
    std::uint16_t port() const {
        sockaddr_in at{};
        socklen_t length = sizeof at;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&at), &length) != 0) return 0;
        return ntohs(at.sin_port);
    }
};

// The lowest of `width` consecutive ports of 127.0.0.1 nobody holds, below the kernel's own
// range so that no connection of another test takes one meanwhile; 0 if none was found.
std::uint16_t free_window(unsigned width) {
    unsigned low = 32768;
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
    for (unsigned top = low - 1; top >= 20000 + width; top -= width) {
        bool all = true;
        for (unsigned p = top - width + 1; p <= top && all; ++p) {
            Socket probe;
            const SocketAddress at = loopback(static_cast<std::uint16_t>(p));
            all = bind(probe.fd, at.get(), at.length) == 0;
        }
        if (all) return static_cast<std::uint16_t>(top - width + 1);
    }
    return 0;
}

}  // namespace

TEST_CASE("tcp_source_ports: the texts it takes and the ones it refuses") {
    CHECK(parsed("").mode == Mode::follow_policy);
    CHECK(parsed("none").mode == Mode::none);
    const SourcePortSetting range = parsed("1000-1023");
    CHECK(range.mode == Mode::range);
    CHECK(range.range.first == 1000);
    CHECK(range.range.last == 1023);
    const SourcePortSetting one = parsed("900");
    CHECK(one.mode == Mode::range);
    CHECK(one.range.first == 900);
    CHECK(one.range.last == 900);
    CHECK(parsed("1-65535").range.last == 65535);

    for (const char* bad : {"0-10", "10-5", "a-b", "70000", "1000-", "-1000", " 1000-1023",
                            "1000-1023 ", "1000:1023", "1e3-1023", "NONE"}) {
        SourcePortSetting out;
        std::string why;
        INFO(bad);
        CHECK(parse_source_ports(bad, out, why) == -BMI_EINVAL);
        CHECK_FALSE(why.empty());
    }
}

TEST_CASE("tcp_source_ports: a trusted-connection policy gives the range unless the setting "
          "names its own") {
    bmi::support::keys::TrustedSources policy;
    policy.ports_enforced = true;
    policy.first_port = 0;
    policy.last_port = 1023;

    SourcePorts follows(parsed(""));
    CHECK_FALSE(follows.range());
    follows.follow(policy);
    REQUIRE(follows.range());
    CHECK(follows.range()->first == 1);  // port 0 is no source port
    CHECK(follows.range()->last == 1023);
    policy.ports_enforced = false;  // a later policy without ports lets the kernel choose again
    follows.follow(policy);
    CHECK_FALSE(follows.range());

    policy.ports_enforced = true;
    SourcePorts none(parsed("none"));
    none.follow(policy);
    CHECK_FALSE(none.range());

    SourcePorts own(parsed("2000-2010"));
    own.follow(policy);
    REQUIRE(own.range());
    CHECK(own.range()->first == 2000);
    CHECK(own.range()->last == 2010);
}

TEST_CASE("tcp_source_ports: binds from the top of the range down, skips ports in use, and "
          "falls back to the kernel's port when the range is full") {
    constexpr unsigned width = 3;
    const std::uint16_t first = free_window(width);
    REQUIRE(first != 0);
    const auto last = static_cast<std::uint16_t>(first + width - 1);
    SourcePortSetting setting;
    setting.mode = Mode::range;
    setting.range = PortRange{first, last};
    SourcePorts ports(setting);
    const SocketAddress target = loopback(9);  // only its family is read

    std::vector<std::uint16_t> taken;
    std::vector<Socket> held(width);
    for (auto& s : held) {
        REQUIRE(ports.bind_source(s.fd, target, SocketAddress{}) == 0);
        taken.push_back(s.port());
    }
    CHECK(taken == std::vector<std::uint16_t>{last, static_cast<std::uint16_t>(last - 1), first});

    // All held: the kernel picks (one warning), and the call still succeeds.
    {
        Socket extra;
        REQUIRE(ports.bind_source(extra.fd, target, SocketAddress{}) == 0);
        CHECK((extra.port() == 0 || extra.port() < first || extra.port() > last));
    }

    // The middle one freed: it is the one the next bind finds, wherever the turn stood.
    close(held[1].fd);
    held[1].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Socket again;
    REQUIRE(ports.bind_source(again.fd, target, SocketAddress{}) == 0);
    CHECK(again.port() == static_cast<std::uint16_t>(last - 1));

    // A local address is kept with the port.
    close(held[0].fd);
    held[0].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Socket bound;
    REQUIRE(ports.bind_source(bound.fd, target, loopback(0)) == 0);
    CHECK(bound.port() == last);
    sockaddr_in at{};
    socklen_t length = sizeof at;
    REQUIRE(getsockname(bound.fd, reinterpret_cast<sockaddr*>(&at), &length) == 0);
    CHECK(at.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
}

TEST_CASE("tcp_source_ports: privileged ports are taken only with the privilege") {
    unsigned unprivileged_start = 1024;
    std::ifstream("/proc/sys/net/ipv4/ip_unprivileged_port_start") >> unprivileged_start;
    // Probing tells whether this process may bind below the threshold (root, or a capability).
    std::uint16_t free_privileged = 0;
    for (unsigned p = 1023; p >= 1000 && free_privileged == 0; --p) {
        Socket probe;
        const SocketAddress at = loopback(static_cast<std::uint16_t>(p));
        if (bind(probe.fd, at.get(), at.length) == 0)
            free_privileged = static_cast<std::uint16_t>(p);
    }
    SourcePorts ports(parsed("1000-1023"));
    Socket s;
    REQUIRE(ports.bind_source(s.fd, loopback(9), SocketAddress{}) == 0);
    if (free_privileged != 0) {
        CHECK(s.port() == free_privileged);  // the highest one free, as OrangeFS's client takes
    } else {
        INFO("unprivileged ports start at " << unprivileged_start);
        CHECK((s.port() == 0 || s.port() > 1023));
    }
}

TEST_CASE("tcp_source_ports: OrangeFS built with trusted connections binds from 1023 down "
          "until a policy comes") {
    SourcePorts client(parsed(""), true);
    REQUIRE(client.range());
    CHECK(client.range()->first == 1);
    CHECK(client.range()->last == 1023);

    bmi::support::keys::TrustedSources policy;  // a server's policy without ports
    client.follow(policy);
    CHECK_FALSE(client.range());
    policy.ports_enforced = true;
    policy.first_port = 40000;
    policy.last_port = 40100;
    client.follow(policy);
    REQUIRE(client.range());
    CHECK(client.range()->first == 40000);

    CHECK_FALSE(SourcePorts(parsed("none"), true).range());
    const SourcePorts own(parsed("2000-2010"), true);
    REQUIRE(own.range());
    CHECK(own.range()->last == 2010);
}

TEST_CASE("tcp_source_ports: the settings table refuses a malformed value where it is read") {
    const auto& row = bmi::method::tcp::setting_spec(bmi::method::tcp::SettingId::source_ports);
    CHECK(bmi::support::parse_setting(row, "1000-1023"));
    CHECK(bmi::support::parse_setting(row, "none"));
    CHECK(bmi::support::parse_setting(row, ""));
    CHECK_FALSE(bmi::support::parse_setting(row, "1023-1000"));
    CHECK_FALSE(bmi::support::parse_setting(row, "privileged"));
    CHECK(bmi::support::expected_text(row).find("FIRST-LAST") != std::string::npos);
}
