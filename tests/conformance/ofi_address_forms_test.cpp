// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi addresses beyond host:port and shm names: a provider's own address bytes (the form a
// server on efa, cxi or psm reports) reach the server they name, and the forms that name no
// peer, or no provider this node has, are refused with a clear code.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "methods/method_config.hpp"
#include "tests/captured_stderr.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_address.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

bool ofi_selected() {
    const auto schemes = compiled_schemes();
    return std::find(schemes.begin(), schemes.end(), "ofi") != schemes.end();
}

// The bytes a socket provider's fi_getname writes for host:port (a sockaddr_in).
std::vector<std::byte> sockaddr_bytes(const method::ofi::OfiAddress& address) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.service)));
    REQUIRE(inet_pton(AF_INET, address.node.c_str(), &in.sin_addr) == 1);
    std::vector<std::byte> out(sizeof in);
    std::memcpy(out.data(), &in, sizeof in);
    return out;
}

core::InitParams client_params() {
    core::InitParams params;
    params.dialect = selected_dialect();
    return params;
}

}  // namespace

TEST_CASE("ofi: a raw provider address reaches the server it names", "[conformance][ofi][raw]") {
    if (!ofi_selected()) return;
    Pair pair = make_peers("ofi");
    auto listen = method::ofi::parse_address(pair.server.instance->listen_addresses());
    REQUIRE(listen);
    if (!listen->has_port()) return;  // shm is addressed by name only
    const std::string raw = method::ofi::format_address(
        listen->provider, method::ofi::format_raw(sockaddr_bytes(*listen)));

    Side client;
    REQUIRE(core::Instance::create(client_params(), client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    BMI_addr_t server = 0;
    REQUIRE(client.instance->addr_lookup(raw, server) == 0);

    // Both sides progress on their own: each wait below drives one of them only.
    Pump server_progress(*pair.server.instance);
    Pump client_progress(*client.instance);
    std::vector<char> out(4096), in(4096, 0);
    fill_pattern(out.data(), out.size(), 31);
    auto first = unexpected_request(client, server, out.data(), 64, 3);
    post_and_wait(client, first);
    auto hello = wait_unexpected(pair.server);
    // The server names the client by its endpoint, as it would any peer.
    const char* seen_as = pair.server.instance->rev_lookup(hello.addr);
    REQUIRE(seen_as != nullptr);
    CHECK(std::string(seen_as).starts_with(listen->provider == "tcp" ? "ofi+tcp://127.0.0.1:"
                                                                     : "ofi+"));
    pair.server.instance->unexpected_free(hello.buffer);

    bmi_op_id_t rid = 0;
    REQUIRE(client.instance->post(recv_request(client, server, in.data(), 4096, 4), rid, nullptr) ==
            0);
    post_and_wait(pair.server, send_request(pair.server, hello.addr, out.data(), 4096, 4));
    auto got = wait_op(client, rid);
    CHECK(got.error == 0);
    CHECK(got.actual_size == 4096);
    CHECK(check_pattern(in.data(), in.size(), 31));
}

TEST_CASE("ofi: address forms that name no peer, or no provider here, are refused",
          "[conformance][ofi][raw]") {
    if (!ofi_selected()) return;
    // A raw address is what a server reports, never what it listens on.
    core::InitParams raw_listen = client_params();
    raw_listen.listen = "ofi+tcp://0x02000d057f000001";
    raw_listen.flags = BMI_INIT_SERVER;
    std::unique_ptr<core::Instance> refused;
    CHECK(core::Instance::create(raw_listen, refused) == -BMI_EINVAL);

    // A provider no node has: fi_getinfo finds nothing to listen on.
    core::InitParams missing = client_params();
    missing.listen = "ofi+nosuchprovider://";
    missing.flags = BMI_INIT_SERVER;
    CHECK(core::Instance::create(missing, refused) == -BMI_ENOPROTOOPT);

    // A domain is somewhere to listen, not a peer; a malformed raw address is no address.
    Side client;
    REQUIRE(core::Instance::create(client_params(), client.instance) == 0);
    BMI_addr_t addr = 0;
    CHECK(client.instance->addr_lookup("ofi+nosuchprovider://dom0", addr) == -BMI_EINVAL);
    CHECK(client.instance->addr_lookup("ofi+tcp://0x0200zz", addr) == -BMI_EINVAL);
}

TEST_CASE("ofi: a server on an allocated plane of such a provider listens in its domain",
          "[conformance][ofi][raw]") {
    if (!ofi_selected()) return;
    // No provider of that name here: the listen the plane implies reaches fi_getinfo, which
    // finds nothing, and the server does not start.
    core::InitParams server = client_params();
    server.flags = BMI_INIT_SERVER;
    server.allocation = "id=bmi.fab type=ofi plane=nosuchprovider/dom0 endpts=1";
    std::unique_ptr<core::Instance> refused;
    CapturedStderr warnings;
    CHECK(core::Instance::create(server, refused) == -BMI_ENOPROTOOPT);
    // A socket provider's plane says no host or port: the server needs a listen address.
    server.allocation = "id=bmi.fab type=ofi plane=tcp/lo endpts=1";
    CHECK(core::Instance::create(server, refused) == -BMI_EINVAL);
    const std::string said = warnings.stop();
    CHECK(said.find("fi_getinfo(nosuchprovider)") != std::string::npos);
    CHECK(said.find("an ofi+tcp server needs a listen address") != std::string::npos);
}

TEST_CASE("ofi: an authorization key is for cxi, and a malformed one is named",
          "[conformance][ofi][auth_key]") {
    if (!ofi_selected()) return;
    core::InitParams server = client_params();
    server.listen = "ofi+tcp://127.0.0.1:0";
    server.flags = BMI_INIT_SERVER;
    std::unique_ptr<core::Instance> refused;
    CapturedStderr warnings;
    // A key fences a job's traffic off: a provider that would drop it does not start.
    server.options = "ofi_auth_key=7:1024";
    CHECK(core::Instance::create(server, refused) == -BMI_EINVAL);
    server.options = "ofi_auth_key=7:0";
    CHECK(core::Instance::create(server, refused) == -BMI_EINVAL);
    // A client is told at its first lookup.
    core::InitParams keyed_client = client_params();
    keyed_client.options = "ofi_auth_key=7:1024";
    Side client;
    REQUIRE(core::Instance::create(keyed_client, client.instance) == 0);
    BMI_addr_t addr = 0;
    CHECK(client.instance->addr_lookup("ofi+tcp://127.0.0.1:1", addr) < 0);
    const std::string said = warnings.stop();
    CHECK(said.find("ofi+tcp takes no authorization key; ofi_auth_key (BMI_OFI_AUTH_KEY) is for "
                    "cxi") != std::string::npos);
    CHECK(said.find("ofi_auth_key (BMI_OFI_AUTH_KEY) '7:0': expected SVC_ID:VNI") !=
          std::string::npos);
    // Without the key the same server starts: the key was the whole refusal.
    server.options = "";
    std::unique_ptr<core::Instance> started;
    CHECK(core::Instance::create(server, started) == 0);
}

#endif
