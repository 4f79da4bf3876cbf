// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi_auth_key: cxi's service and VNI in cxi's layout, the texts that are not that, and the
// providers that take a key.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "bmi-types.h"
#include "methods/ofi/ofi_auth_key.hpp"

using bmi::method::ofi::CxiAuthKey;
using bmi::method::ofi::parse_auth_key;
using bmi::method::ofi::takes_auth_key;

namespace {
std::vector<std::byte> parsed(const char* text) {
    std::vector<std::byte> out{std::byte{0x55}};
    std::string why;
    REQUIRE(parse_auth_key(text, out, why) == 0);
    return out;
}

int refusal(const char* text, std::string& why) {
    std::vector<std::byte> out;
    return parse_auth_key(text, out, why);
}
}  // namespace

TEST_CASE("ofi_auth_key: none, or cxi's service and VNI") {
    CHECK(parsed("").empty());

    const auto cxi = parsed("4294967295:65535");
    REQUIRE(cxi.size() == sizeof(CxiAuthKey));
    CxiAuthKey key;
    std::memcpy(&key, cxi.data(), sizeof key);
    CHECK(key.svc_id == 4294967295u);
    CHECK(key.vni == 65535);
    // The padding the provider copies is zero.
    CHECK(cxi[6] == std::byte{0});
    CHECK(cxi[7] == std::byte{0});

    const auto small = parsed("1:1");
    std::memcpy(&key, small.data(), sizeof key);
    CHECK(key.svc_id == 1);
    CHECK(key.vni == 1);

    CHECK(takes_auth_key("cxi"));
    for (const char* provider : {"tcp", "verbs", "shm", "efa", "psm3", "udp", "sockets", ""})
        CHECK_FALSE(takes_auth_key(provider));
}

TEST_CASE("ofi_auth_key: a malformed key is refused and says what was expected") {
    for (const char* text : {"7", "7:", ":7", "0:7", "7:0", "7:65536", "4294967296:1", "x:1",
                             "1:2:3", " 1:2", "1:2 ", "-1:2", "+1:2", "0x1:2", "0x0102"}) {
        std::string why;
        INFO(text);
        CHECK(refusal(text, why) == -BMI_EINVAL);
        CHECK_FALSE(why.empty());
    }
    std::string why;
    CHECK(refusal("7", why) == -BMI_EINVAL);
    CHECK(why.find("SVC_ID:VNI") != std::string::npos);
}
