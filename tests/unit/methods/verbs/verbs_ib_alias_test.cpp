// SPDX-License-Identifier: LGPL-2.1-or-later
// OrangeFS's InfiniBand configuration on the verbs method: a server initialized with "bmi_ib"
// listening on ib://, reached by clients that look it up as ib:// and as a list naming tcp://
// and ib:// (doc/methods/verbs.md, "OrangeFS's names").
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "harness.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

// A server as OrangeFS's configures it, listening on ib://127.0.0.1 (port chosen by the
// kernel); returns its listen address as BMI_GET_METH_ADDR answers it.
std::string start_ib_server(Side& server) {
    core::InitParams params;
    params.method_list = "bmi_ib";
    params.listen = "ib://127.0.0.1:0";
    params.flags = BMI_INIT_SERVER;
    params.dialect = selected_dialect();
    REQUIRE(core::Instance::create(params, server.instance) == 0);
    REQUIRE(server.instance->open_context(server.context) == 0);
    const std::string listen = server.instance->listen_addresses();
    INFO("listen " << listen);
    REQUIRE(listen.rfind("ib://127.0.0.1:", 0) == 0);
    return listen;
}

// The client looks the server up as `address`, introduces itself and gets a reply back.
void talk(Pair& pair, const std::string& address) {
    core::InitParams params;
    params.method_list = "bmi_tcp,bmi_ib";
    params.dialect = selected_dialect();
    REQUIRE(core::Instance::create(params, pair.client.instance) == 0);
    REQUIRE(pair.client.instance->open_context(pair.client.context) == 0);
    REQUIRE(pair.client.instance->addr_lookup(address, pair.server_addr) == 0);
    // OrangeFS matches the reverse lookup against its Alias lines: the string as looked up.
    const char* rev = pair.client.instance->rev_lookup(pair.server_addr);
    REQUIRE(rev != nullptr);
    CHECK(std::string(rev) == address);
    const BMI_addr_t client_addr = introduce(pair);

    char reply[64] = {};
    bmi_op_id_t rid = 0;
    REQUIRE(pair.client.instance->post(
                recv_request(pair.client, pair.server_addr, reply, sizeof reply, 7), rid,
                nullptr) >= 0);
    const char answer[] = "served over verbs";
    {
        Pump client_pump(*pair.client.instance);
        post_and_wait(pair.server,
                      send_request(pair.server, client_addr, answer, sizeof answer, 7));
        if (rid != 0) REQUIRE(wait_op(pair.client, rid).error == 0);
    }
    CHECK(std::strcmp(reply, answer) == 0);
    // The server sees the client on verbs: its only method.
    const char* methods = nullptr;
    REQUIRE(pair.server.instance->get_info(0, BMI_TRANSPORT_METHODS_STRING, &methods) == 0);
    CHECK(std::string(methods) == "bmi_verbs");
}
}  // namespace

TEST_CASE("verbs: a bmi_ib server on ib:// serves a client that looks up ib://", "[verbs]") {
    Pair pair;
    const std::string listen = start_ib_server(pair.server);
    talk(pair, listen);
}

TEST_CASE("verbs: a list tcp://...,ib://... reaches a bmi_ib server over verbs", "[verbs]") {
    Pair pair;
    const std::string listen = start_ib_server(pair.server);
    // Nothing listens on the tcp part's port: only a lookup that prefers ib:// succeeds.
    talk(pair, "tcp://127.0.0.1:1," + listen);
}

TEST_CASE("verbs: a portless ib:// listen takes a port in the standalone dialect only", "[verbs]") {
    // Mercury's na_bmi listens on "ib://HOST" for bmi+ib, then asks BMI_TCP_GET_PORT.
    core::InitParams params;
    params.method_list = "bmi_ib";
    params.listen = "ib://127.0.0.1";
    params.flags = BMI_INIT_SERVER;
    params.dialect = method::ApiDialect::orangefs;
    std::unique_ptr<core::Instance> refused;
    CHECK(core::Instance::create(params, refused) == -BMI_EINVAL);

    Pair pair;
    params.dialect = method::ApiDialect::standalone;
    REQUIRE(core::Instance::create(params, pair.server.instance) == 0);
    REQUIRE(pair.server.instance->open_context(pair.server.context) == 0);
    int port = 0;
    REQUIRE(pair.server.instance->get_info(0, method::info_listen_port, &port) == 0);
    REQUIRE(port > 0);
    const std::string listen = pair.server.instance->listen_addresses();
    CHECK(listen == "ib://127.0.0.1:" + std::to_string(port));
    talk(pair, listen);
}
