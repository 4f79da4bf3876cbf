// SPDX-License-Identifier: LGPL-2.1-or-later
// OrangeFS's trusted ports and networks (support/keys/trusted_sources.hpp): what they refuse,
// IPv6 and IPv4-mapped sources, and the values they reject.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "bmi-types.h"
#include "support/keys/trusted_sources.hpp"

using bmi::support::keys::make_trusted_sources;
using bmi::support::keys::TrustedSources;

namespace {
sockaddr_storage source(const char* ip, int port) {
    sockaddr_storage out{};
    if (std::string(ip).find(':') == std::string::npos) {
        auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<std::uint16_t>(port));
        REQUIRE(inet_pton(AF_INET, ip, &v4->sin_addr) == 1);
    } else {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<std::uint16_t>(port));
        REQUIRE(inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1);
    }
    return out;
}

const char* refusal(const TrustedSources& t, const char* ip, int port) {
    const sockaddr_storage from = source(ip, port);
    return t.refusal(reinterpret_cast<const sockaddr*>(&from));
}

TrustedSources make(int ports_on, unsigned long first, unsigned long last, int nets_on,
                    std::vector<std::string> nets, std::vector<int> masks, int expect = 0) {
    const unsigned long ports[2] = {first, last};
    std::vector<char*> names;
    for (auto& n : nets) names.push_back(n.data());
    TrustedSources out;
    std::string error;
    const int rc = make_trusted_sources(ports_on, ports, nets_on, static_cast<int>(names.size()),
                                        names.data(), masks.data(), out, error);
    INFO(error);
    REQUIRE(rc == expect);
    if (expect != 0) CHECK(!error.empty());
    return out;
}
}  // namespace

TEST_CASE("trusted ports: only sources in [min, max]", "[trusted]") {
    const TrustedSources t = make(1, 600, 1023, 0, {}, {});
    CHECK(refusal(t, "10.1.2.3", 600) == nullptr);
    CHECK(refusal(t, "10.1.2.3", 1023) == nullptr);
    CHECK(std::string(refusal(t, "10.1.2.3", 1024)) == "port");
    CHECK(std::string(refusal(t, "10.1.2.3", 599)) == "port");
    CHECK(std::string(refusal(t, "::1", 40000)) == "port");
    CHECK(t.text() == "ports 600-1023");
}

TEST_CASE("trusted networks: prefixes, IPv6, IPv4-mapped sources", "[trusted]") {
    // Host bits are ignored, as OrangeFS ignores them.
    const TrustedSources t =
        make(0, 0, 0, 1, {"tcp://192.168.4.7", "tcp://[fd00:1::]", "tcp://10.0.0.0"}, {24, 32, 8});
    CHECK(refusal(t, "192.168.4.200", 5000) == nullptr);
    CHECK(std::string(refusal(t, "192.168.5.1", 5000)) == "network");
    CHECK(refusal(t, "10.200.0.1", 5000) == nullptr);
    CHECK(refusal(t, "fd00:1::42", 5000) == nullptr);
    CHECK(std::string(refusal(t, "fd00:2::42", 5000)) == "network");
    // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d.
    CHECK(refusal(t, "::ffff:192.168.4.9", 5000) == nullptr);
    CHECK(std::string(refusal(t, "::ffff:127.0.0.1", 5000)) == "network");
    // No exception for the loopback address: list 127.0.0.0/8 to let local clients in.
    CHECK(std::string(refusal(t, "127.0.0.1", 5000)) == "network");
    CHECK(t.text() == "networks 192.168.4.0/24 fd00:1::/32 10.0.0.0/8");
}

TEST_CASE("trusted ports and networks together: both must hold", "[trusted]") {
    const TrustedSources t = make(1, 1000, 2000, 1, {"tcp://127.0.0.0"}, {8});
    CHECK(refusal(t, "127.0.0.1", 1500) == nullptr);
    CHECK(std::string(refusal(t, "127.0.0.1", 3000)) == "port");
    CHECK(std::string(refusal(t, "10.0.0.1", 1500)) == "network");
    // Disabled halves refuse nothing.
    const TrustedSources none = make(0, 5, 1, 0, {"garbage"}, {99});
    CHECK(refusal(none, "10.0.0.1", 1) == nullptr);
    CHECK(none.text() == "any source");
}

TEST_CASE("trusted values that cannot be a policy are refused", "[trusted]") {
    make(1, 2000, 1000, 0, {}, {}, -BMI_EINVAL);  // min > max
    make(1, 0, 70000, 0, {}, {}, -BMI_EINVAL);    // past 65535
    make(0, 0, 0, 1, {}, {}, -BMI_EINVAL);        // enabled, nothing listed
    make(0, 0, 0, 1, {"tcp://300.0.0.0"}, {8}, -BMI_EINVAL);
    make(0, 0, 0, 1, {"10.0.0.0"}, {8}, -BMI_EINVAL);  // not a BMI address
    make(0, 0, 0, 1, {"ib://10.0.0.0"}, {8}, -BMI_EINVAL);
    make(0, 0, 0, 1, {"tcp://10.0.0.0"}, {33}, -BMI_EINVAL);
    make(0, 0, 0, 1, {"tcp://fd00::"}, {129}, -BMI_EINVAL);
    make(0, 0, 0, 1, {"tcp://10.0.0.0"}, {-1}, -BMI_EINVAL);
}
