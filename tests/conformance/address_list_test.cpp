// SPDX-License-Identifier: LGPL-2.1-or-later
// Address lists (OrangeFS's multi-method Alias, "tcp://h:p,shm://name"): a server listens on
// every part, and a client's lookup of the whole list uses the best part it can reach. Real
// instances over loopback and shared memory.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "harness.hpp"
#include "methods/method_table.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

bool compiled(std::string_view scheme) {
    for (const auto& d : method::compiled_methods())
        if (d.scheme == scheme) return true;
    return false;
}

// A server listening on tcp and shm at once, as an OrangeFS server with such an Alias does;
// nothing where either method is not compiled.
std::optional<Side> list_server() {
    if (!compiled("tcp") || !compiled("shm")) {
        WARN("needs the tcp and shm methods");
        return std::nullopt;
    }
    Side server;
    core::InitParams params;
    params.listen = test_listen_address("tcp") + "," + test_listen_address("shm");
    params.method_list = "bmi_tcp,bmi_shm";
    params.flags = BMI_INIT_SERVER;
    REQUIRE(core::Instance::create(params, server.instance) == 0);
    REQUIRE(server.instance->open_context(server.context) == 0);
    return server;
}

Side client_of(const std::string& methods) {
    Side client;
    core::InitParams params;
    params.method_list = methods;
    REQUIRE(core::Instance::create(params, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    return client;
}

std::string scheme_of(const char* address) {
    REQUIRE(address != nullptr);
    const std::string text(address);
    return text.substr(0, text.find("://"));
}

// Sends one unexpected message to `to`, waits until the server has it, and says over which
// method it came (the scheme of the sender's address on the server).
std::string deliver(Side& client, BMI_addr_t to, Side& server) {
    Pump pump(*server.instance);  // a tcp connection needs the server's side of the handshake
    const char text[] = "over the list";
    auto request = send_request(client, to, text, sizeof text, 3);
    request.kind = method::OpKind::send_unexpected;
    REQUIRE(post_and_wait(client, request).error == 0);
    core::UnexpectedMessage got = wait_unexpected(server);
    CHECK(got.size == sizeof text);
    server.instance->unexpected_free(got.buffer);
    return scheme_of(server.instance->rev_lookup(got.addr));
}

}  // namespace

TEST_CASE("address list: a client on the server's node takes shm from the list", "[address-list]") {
    std::optional<Side> made = list_server();
    if (!made) return;
    Side& server = *made;
    const std::string list = server.instance->listen_addresses();
    REQUIRE(list.find(',') != std::string::npos);
    Side client = client_of("");
    BMI_addr_t addr = 0;
    REQUIRE(client.instance->addr_lookup(list, addr) == 0);
    // Answered as looked up, as OrangeFS's BMI does (OrangeFS matches it to its Alias lines).
    CHECK(std::string(client.instance->rev_lookup(addr)) == list);
    CHECK(deliver(client, addr, server) == "shm");
    // The same list again is the same peer.
    BMI_addr_t again = 0;
    REQUIRE(client.instance->addr_lookup(list, again) == 0);
    CHECK(again == addr);
}

TEST_CASE("address list: a client without shm, or told of another node, takes tcp",
          "[address-list]") {
    std::optional<Side> made = list_server();
    if (!made) return;
    Side& server = *made;
    const std::string list = server.instance->listen_addresses();
    Side tcp_only = client_of("bmi_tcp");
    BMI_addr_t addr = 0;
    REQUIRE(tcp_only.instance->addr_lookup(list, addr) == 0);
    CHECK(deliver(tcp_only, addr, server) == "tcp");

    // The server's shm name beside a tcp address of another node (TEST-NET-1: never this
    // one): the name may be another server there, so tcp is used (nothing is sent).
    const std::string shm_part = list.substr(list.find("shm://"));
    Side client = client_of("");
    BMI_addr_t elsewhere = 0;
    REQUIRE(client.instance->addr_lookup("tcp://192.0.2.1:3334," + shm_part, elsewhere) == 0);
    CHECK(std::string(client.instance->rev_lookup_unexpected(elsewhere)) == "192.0.2.1");
    CHECK(client.instance->addr_lookup("tcp://127.0.0.1:1,nonsense", elsewhere) == -BMI_EINVAL);
    CHECK(client.instance->addr_lookup("gm://x,mx://y", elsewhere) == -BMI_ENOPROTOOPT);
}
