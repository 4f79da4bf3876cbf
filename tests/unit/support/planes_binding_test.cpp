// SPDX-License-Identifier: LGPL-2.1-or-later
// An allocation bound on this node: the address it has on the plane, the ports of this
// process's slice, QoS code points, what cannot be enforced, and where an instance's
// allocation comes from (one source, strictly read).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "../key_files.hpp"
#include "bmi-types.h"
#include "support/planes/allocation_source.hpp"
#include "support/planes/plane_binding.hpp"
#include "support/planes/qos.hpp"

using namespace bmi::support::planes;
using bmi::support::Settings;

namespace {
Allocation one(const std::string& text) {
    ParseError error;
    auto all = parse_allocations(text, "test", error);
    INFO(error.text());
    REQUIRE(all);
    REQUIRE(all->size() == 1);
    return all->front();
}

std::string node() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return host;
}

// A scratch file removed with the test.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& text) {
        char name[] = "/tmp/bmi-alloc-XXXXXX";
        const int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
        close(fd);
        path = name;
    }
    ~TempFile() { unlink(path.c_str()); }
};
}  // namespace

TEST_CASE("QoS levels map to DiffServ code points, or to nothing", "[planes][qos]") {
    CHECK(dscp_for_level("cs1") == 8);
    CHECK(dscp_for_level("af41") == 34);
    CHECK(dscp_for_level("ef") == 46);
    CHECK(dscp_for_level("le") == 1);
    CHECK(dscp_for_level("dscp:63") == 63);
    CHECK_FALSE(dscp_for_level("dscp:64"));
    CHECK_FALSE(dscp_for_level("dscp:"));
    CHECK_FALSE(dscp_for_level("dscp:1x"));
    CHECK_FALSE(dscp_for_level("EF"));
    CHECK_FALSE(dscp_for_level("gold"));
    CHECK(tos_byte(46) == 0xb8);
    CHECK(socket_priority(46) == 5);
    CHECK(socket_priority(56) == 6);  // 7 needs CAP_NET_ADMIN
}

TEST_CASE("a tcp allocation binds to this node's address and its slice of ports",
          "[planes][binding]") {
    const Allocation a = one("id=bmi.t type=tcp plane=127.0.0.0/8 endpts=2 "
                             "ports=33000-33002,33010 qos=cs1 bw=200");
    PlaneBinding b;
    std::string why;
    REQUIRE(bind_allocation(a, 0, b, why) == 0);
    CHECK(b.local_host == "127.0.0.1");
    CHECK(b.ports == std::vector<std::uint16_t>{33000, 33001});
    CHECK(b.dscp == 8);
    CHECK(b.bandwidth_mbps == 200);
    REQUIRE(bind_allocation(a, 1, b, why) == 0);
    CHECK(b.ports == std::vector<std::uint16_t>{33002, 33010});
    // A third process on the node would run past the four allocated ports.
    CHECK(bind_allocation(a, 2, b, why) == -BMI_EINVAL);
    CHECK(why.find("allocation bmi.t: ports:") == 0);
    const auto notes = enforcement_notes(b);
    REQUIRE(notes.size() == 2);
    CHECK(notes[0].enforced);
    CHECK(notes[0].text.find("DSCP 8") != std::string::npos);
    CHECK(notes[1].text.find("SO_MAX_PACING_RATE 25000000") != std::string::npos);
}

TEST_CASE("a plane this node is not on, or cannot enforce, says so", "[planes][binding]") {
    PlaneBinding b;
    std::string why;
    // TEST-NET-3: documentation only, never configured on a test machine.
    CHECK(bind_allocation(one("id=x type=tcp plane=203.0.113.0/24 endpts=1 ports=1000"), 0, b,
                          why) == -BMI_EADDRNOTAVAIL);
    CHECK(why == "allocation x: plane: no interface of this node is on 203.0.113.0/24");
    CHECK(bind_allocation(one("id=s type=shm plane=not-" + node() + " endpts=1"), 0, b, why) ==
          -BMI_EADDRNOTAVAIL);
    CHECK(why.find("is another node") != std::string::npos);
    CHECK(bind_allocation(one("id=v type=verbs plane=fe80::/64 endpts=1"), 0, b, why) ==
          -BMI_EINVAL);
    CHECK(why.find("GID prefix") != std::string::npos);

    REQUIRE(bind_allocation(one("id=s type=shm plane=" + node() + " endpts=1 qos=gold bw=10"), 0, b,
                            why) == 0);
    const auto notes = enforcement_notes(b);
    REQUIRE(notes.size() == 2);
    CHECK_FALSE(notes[0].enforced);
    CHECK(notes[0].text.find("qos gold: not a level") == 0);
    CHECK_FALSE(notes[1].enforced);

    REQUIRE(bind_allocation(one("id=w type=tcp plane=0.0.0.0/0 endpts=1 ports=1000"), 0, b, why) ==
            0);
    CHECK(b.local_host == "0.0.0.0");
}

TEST_CASE("an ofi plane names the provider and domain, and asks for a traffic class",
          "[planes][binding]") {
    PlaneBinding b;
    std::string why;
    REQUIRE(bind_allocation(one("id=f type=ofi plane=verbs/mlx5_0 endpts=1 qos=cs1 bw=10"), 0, b,
                            why) == 0);
    CHECK(b.ofi_provider == "verbs");
    CHECK(b.ofi_domain == "mlx5_0");
    CHECK(describe(b) == "ofi verbs/mlx5_0 (f)");
    auto notes = enforcement_notes(b);
    REQUIRE(notes.size() == 2);
    // libfabric takes a traffic class as a hint that a provider may ignore without a word.
    CHECK_FALSE(notes[0].enforced);
    CHECK(notes[0].text.find("DSCP 8 (FI_TC_DSCP) asked of libfabric's verbs") !=
          std::string::npos);
    CHECK_FALSE(notes[1].enforced);
    CHECK(notes[1].text.find("ofi cannot pace") != std::string::npos);

    REQUIRE(bind_allocation(one("id=g type=ofi plane=shm endpts=1 qos=cs1"), 0, b, why) == 0);
    CHECK(b.ofi_domain.empty());
    notes = enforcement_notes(b);
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].text.find("shared memory has no network to mark") != std::string::npos);
}

TEST_CASE("an instance's allocation comes from one source, strictly read", "[planes][source]") {
    Settings settings(bmi::support::general_settings());
    InstanceAllocation out;
    REQUIRE(resolve_allocation(settings, "", out) == 0);
    CHECK(out.entries.empty());

    const std::string text = "id=a type=tcp plane=127.0.0.0/8 endpts=1 ports=40000";
    REQUIRE(resolve_allocation(settings, text, out) == 0);
    REQUIRE(out.entries.size() == 1);
    CHECK(out.origin == "the program's allocation");

    TempFile file(text + "\nid=b type=tcp plane=127.0.0.0/8 endpts=1 ports=40001\n");
    REQUIRE(settings.load("allocation_file=" + file.path) == 0);
    REQUIRE(resolve_allocation(settings, "", out) == 0);
    CHECK(out.entries.size() == 2);
    CHECK(out.origin == file.path);
    // Two sources at once: which one would the admin mean?
    CHECK(resolve_allocation(settings, text, out) == -BMI_EINVAL);

    REQUIRE(settings.load("allocation_file=/nonexistent/alloc") == 0);
    CHECK(resolve_allocation(settings, "", out) == -BMI_ENOENT);

    // Refused at once, not waited on until someone writes to it.
    bmi::test::KeyFiles dir;
    const std::string fifo = dir.fifo("alloc");
    REQUIRE(settings.load("allocation_file=" + fifo) == 0);
    const auto rc = bmi::test::returns_within(
        std::chrono::seconds(3), fifo, [&] { return resolve_allocation(settings, "", out); });
    REQUIRE(rc);
    CHECK(*rc == -BMI_EINVAL);

    Settings plain(bmi::support::general_settings());
    CHECK(resolve_allocation(plain, "id=a type=tcp plane=127.0.0.0/8 endpts=2 ports=40000", out) ==
          -BMI_EINVAL);  // fewer ports than endpoints
    CHECK(resolve_allocation(plain, text + ";" + text, out) == -BMI_EINVAL);  // id twice
    CHECK(resolve_allocation(plain,
                             text + " key_file=/k/a;" +
                                 "id=b type=tcp plane=127.0.0.0/8 endpts=1 ports=40001",
                             out) == -BMI_EINVAL);  // one keyed, one not
    REQUIRE(resolve_allocation(plain,
                               text + " key_file=/k/a;id=b type=shm plane=" + node() +
                                   " endpts=1 key_file=/k/a",
                               out) == 0);
    CHECK(out.key_file == "/k/a");
}

TEST_CASE("allocation ids for PMIx without a launcher fall back to no allocation",
          "[planes][source]") {
    // The test runner may itself run under a launcher; this case is about having none.
    unsetenv("PMIX_NAMESPACE");
    Settings settings(bmi::support::general_settings());
    REQUIRE(settings.load("allocation_id=bmi.net.tcp0+bmi.net.tcp1") == 0);
    InstanceAllocation out;
    CHECK(resolve_allocation(settings, "", out) == 0);
    CHECK(out.entries.empty());
    REQUIRE(settings.load("allocation_id=bmi.a+pmix.b") == 0);
    CHECK(resolve_allocation(settings, "", out) == -BMI_EINVAL);  // ids are checked regardless
}
