// SPDX-License-Identifier: LGPL-2.1-or-later
// The checks on numbers a verbs peer sends (credits, RTS lengths). Pure arithmetic: these run
// natively, without an RDMA device; verbs_hostile_test shows the same rules on a real device.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "methods/method.hpp"
#include "methods/verbs/verbs_device.hpp"
#include "methods/verbs/verbs_peer_checks.hpp"
#include "methods/verbs/verbs_settings.hpp"

using namespace bmi::method::verbs;

TEST_CASE("verbs checks: a peer may send only as many messages as it was granted", "[verbs]") {
    int granted = 2;
    REQUIRE(spend_granted_credit(granted));
    REQUIRE(spend_granted_credit(granted));
    REQUIRE_FALSE(spend_granted_credit(granted));
    REQUIRE(granted == 0);
}

TEST_CASE("verbs checks: returned credits never exceed the window the peer granted", "[verbs]") {
    int credits = 10;
    REQUIRE(take_returned_credits(credits, 6, 16));
    REQUIRE(credits == 16);
    REQUIRE_FALSE(take_returned_credits(credits, 1, 16));
    REQUIRE(credits == 16);
    credits = 0;
    // A 16-bit field full of ones, and the count that would wrap an int when added often.
    REQUIRE_FALSE(take_returned_credits(credits, 0xffff, 16));
    REQUIRE_FALSE(take_returned_credits(credits, 0xffffffffu, 16));
    REQUIRE(credits == 0);
    REQUIRE(take_returned_credits(credits, 16, 16));
}

TEST_CASE("verbs checks: RTS lengths are summed without wrapping", "[verbs]") {
    constexpr std::uint64_t limit = INT64_MAX / 2;
    const std::uint64_t half = std::uint64_t{1} << 63;
    std::vector<RemoteSegment> wrap{{0, half, 0, 0}, {0, half, 0, 0}, {0, 4096, 0, 0}};
    REQUIRE_FALSE(rts_total(wrap, UINT64_MAX).has_value());  // 2^63 + 2^63 + 4096 is not 4096
    std::vector<RemoteSegment> big{{0, limit, 0, 0}, {0, 1, 0, 0}};
    REQUIRE_FALSE(rts_total(big, limit).has_value());
    std::vector<RemoteSegment> empty_piece{{0, 4096, 0, 0}, {0, 0, 0, 0}};
    REQUIRE_FALSE(rts_total(empty_piece, limit).has_value());
    std::vector<RemoteSegment> fine{{0, 4096, 0, 0}, {0, 8192, 0, 0}};
    REQUIRE(rts_total(fine, limit) == std::uint64_t{12288});
}

TEST_CASE("verbs choice: the rows hold the defaults, DeviceChoice none of its own",
          "[verbs][settings]") {
    // A default written in DeviceChoice too would be a second copy that can drift from the row.
    const DeviceChoice unset;
    CHECK(unset.gid_index == 0);
    CHECK(unset.credits == 0);
    CHECK(unset.srq_cap == 0);
    CHECK(unset.send_buffers == 0);
    CHECK(unset.max_connections == 0);
    CHECK(unset.pending_per_source == 0);

    const bmi::method::Config config;  // every row at its default, as no BMI_VERBS_* is set
    DeviceChoice choice;
    REQUIRE(load_choice(config.settings, choice) == 0);
    const auto row_default = [](SettingId id) {
        const auto& row = setting_spec(id);
        return *bmi::support::parse_setting(row, row.default_text);
    };
    CHECK(choice.gid_index == row_default(SettingId::gid_index));
    CHECK(choice.credits == row_default(SettingId::credits));
    CHECK(choice.pending_per_source == row_default(SettingId::pending_per_source));
}

TEST_CASE("verbs checks: a HELLO of another version is told apart by its first bytes", "[verbs]") {
    Hello ours;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&ours);
    REQUIRE(hello_speaks_our_protocol(std::span<const std::uint8_t>(bytes, hello_version_end)));
    REQUIRE_FALSE(
        hello_speaks_our_protocol(std::span<const std::uint8_t>(bytes, hello_version_end - 1)));
    Hello older;
    older.version = protocol_version - 1;
    REQUIRE_FALSE(hello_speaks_our_protocol(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(&older), hello_version_end)));
    Hello alien;
    alien.magic = 0x12345678;
    REQUIRE_FALSE(hello_speaks_our_protocol(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(&alien), hello_version_end)));
}

TEST_CASE("verbs checks: a HELLO states an unexpected limit within the eager size", "[verbs]") {
    Hello h;
    h.name_length = 0;
    h.credits = 16;
    h.eager_payload = eager_payload;
    h.mtu = IBV_MTU_1024;
    h.unexpected_limit = 4096;
    CHECK(hello_well_formed(h));
    h.unexpected_limit = eager_payload;
    CHECK(hello_well_formed(h));
    h.unexpected_limit = 0;  // states none: a peer we could send nothing unexpected
    CHECK_FALSE(hello_well_formed(h));
    h.unexpected_limit = eager_payload + 1;  // more than one SEND carries
    CHECK_FALSE(hello_well_formed(h));
}
