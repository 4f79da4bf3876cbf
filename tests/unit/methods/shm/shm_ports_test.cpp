// SPDX-License-Identifier: LGPL-2.1-or-later
// shm names with a port ("shm://host:port", the form Mercury's na_bmi builds for every
// protocol): which names are valid, a listener that asks for a free port, the port it reports,
// and clients that reach it under that name. Real instances over real abstract sockets.
#include <catch2/catch.hpp>

#include <string>

#include "harness.hpp"
#include "methods/method.hpp"
#include "methods/shm/shm_wire.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
Side server_at(const std::string& listen, method::ApiDialect dialect) {
    core::InitParams params;
    params.listen = listen;
    params.flags = BMI_INIT_SERVER;
    params.dialect = dialect;
    Side out;
    REQUIRE(core::Instance::create(params, out.instance) == 0);
    REQUIRE(out.instance->open_context(out.context) == 0);
    return out;
}

int listen_port(Side& side) {
    int port = -1;
    const int rc = side.instance->get_info(0, method::info_listen_port, &port);
    return rc == 0 ? port : rc;
}

// One unexpected message from a fresh client that looks the server up as `address`.
void one_message(Side& server, const std::string& address) {
    Side client;
    core::InitParams params;
    REQUIRE(core::Instance::create(params, client.instance) == 0);
    REQUIRE(client.instance->open_context(client.context) == 0);
    BMI_addr_t to = 0;
    REQUIRE(client.instance->addr_lookup(address, to) == 0);
    const char text[] = "port";
    core::PostRequest send = unexpected_request(client, to, text, sizeof text, 5);
    post_and_wait(client, send);
    core::UnexpectedMessage got = wait_unexpected(server);
    CHECK(got.size == static_cast<bmi_size_t>(sizeof text));
    CHECK(got.tag == 5);
    server.instance->unexpected_free(got.buffer);
}
}  // namespace

TEST_CASE("shm: names may end in a port, nothing else after a colon", "[shm][address]") {
    using method::shm::valid_name;
    for (const char* good : {"host", "127.0.0.1:0", "node-3:65535", "a.b_c-d:1"})
        CHECK(valid_name(good));
    for (const char* bad : {"", ":1", "a:", "a:b", "a:65536", "a:1:2", "a:123456", "a b:1"})
        CHECK_FALSE(valid_name(bad));
    CHECK(method::shm::name_port("x:4242") == 4242);
    CHECK(method::shm::name_port("x") == -1);
}

TEST_CASE("shm: a listener on NAME:0 takes a free port and is reached there", "[shm][address]") {
    const std::string base = "ports-" + std::to_string(getpid());
    auto first = server_at("shm://" + base + ":0", method::ApiDialect::orangefs);
    auto second = server_at("shm://" + base + ":0", method::ApiDialect::orangefs);
    const int a = listen_port(first), b = listen_port(second);
    CHECK(a >= 49152);
    CHECK(b >= 49152);
    CHECK(a != b);
    CHECK(first.instance->listen_addresses() == "shm://" + base + ":" + std::to_string(a));
    // Any spelling of port 0 asks for a free one.
    auto third = server_at("shm://" + base + ":00", method::ApiDialect::orangefs);
    CHECK(listen_port(third) >= 49152);
    one_message(first, "shm://" + base + ":" + std::to_string(a));
    one_message(second, "shm://" + base + ":" + std::to_string(b));
}

TEST_CASE("shm: a portless name gets a port in the standalone dialect only", "[shm][address]") {
    const std::string name = "ports-bare-" + std::to_string(getpid());
    auto exact = server_at("shm://" + name, method::ApiDialect::orangefs);
    CHECK(exact.instance->listen_addresses() == "shm://" + name);
    CHECK(listen_port(exact) == -BMI_ENOSYS);
    one_message(exact, "shm://" + name);
    // Mercury's na_bmi listens on "shm://HOST", asks BMI_TCP_GET_PORT, then hands out
    // "shm://HOST:PORT": a second server on the same HOST must not collide.
    auto one = server_at("shm://" + name, method::ApiDialect::standalone);
    auto two = server_at("shm://" + name, method::ApiDialect::standalone);
    const int p1 = listen_port(one), p2 = listen_port(two);
    REQUIRE(p1 > 0);
    REQUIRE(p2 > 0);
    CHECK(p1 != p2);
    one_message(two, "shm://" + name + ":" + std::to_string(p2));
    // An explicit port is taken as given.
    auto fixed = server_at("shm://" + name + ":7", method::ApiDialect::standalone);
    CHECK(listen_port(fixed) == 7);
}
