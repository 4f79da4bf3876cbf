// SPDX-License-Identifier: LGPL-2.1-or-later
// What the API dialect changes in the tcp method, over real sockets on 127.0.0.1: message
// classes on v2 frames, a listen address without a port, and the legacy framing setting.
#include <catch2/catch.hpp>

#include <string>

#include "methods/tcp/tcp_method.hpp"
#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp::test;

namespace {
// A server instance of `dialect` listening on `listen`; the create status, 0 on success.
int make_server(TestSink& sink, const std::string& listen, ApiDialect dialect,
                std::unique_ptr<Method>& out) {
    Config config;
    config.listen_address = listen;
    config.flags = BMI_INIT_SERVER;
    config.dialect = dialect;
    return tcp::create(config, sink, out);
}
}  // namespace

TEST_CASE("an unexpected message keeps its class between libbmi peers", "[tcp][dialect]") {
    Pair pair;
    REQUIRE(pair.create_status == 0);
    char text[] = "classy";
    for (std::uint8_t msg_class : {std::uint8_t{0}, std::uint8_t{3}, std::uint8_t{255}}) {
        auto op = make_op(OpKind::send_unexpected, pair.to_server, 9, text, sizeof text);
        op->msg_class = msg_class;
        post(*pair.client, *op);
        const std::size_t before = pair.server_sink.unexpected.size();
        REQUIRE(pair.run([&] {
            return op->completed && pair.server_sink.unexpected.size() > before;
        }));
        CHECK(op->error == 0);
        CHECK(pair.server_sink.unexpected.back().msg_class == msg_class);
        CHECK(pair.server_sink.unexpected.back().tag == 9);
    }
}

TEST_CASE("a standalone server without a port gets one from the kernel", "[tcp][dialect]") {
    TestSink server_sink, client_sink;
    std::unique_ptr<Method> server, client;
    REQUIRE(make_server(server_sink, "tcp://127.0.0.1", ApiDialect::standalone, server) == 0);
    int port = 0;
    REQUIRE(server->get_info(nullptr, info_listen_port, &port) == 0);
    CHECK(port > 0);
    CHECK(server->listen_address() == "tcp://127.0.0.1:" + std::to_string(port));

    Config cc;
    cc.dialect = ApiDialect::standalone;
    REQUIRE(tcp::create(cc, client_sink, client) == 0);
    int none = 0;
    CHECK(client->get_info(nullptr, info_listen_port, &none) == -BMI_ENOSYS);
    std::shared_ptr<Peer> to_server;
    REQUIRE(client->lookup("tcp://127.0.0.1:" + std::to_string(port), to_server) == 0);
    char text[] = "found you";
    auto op = make_op(OpKind::send_unexpected, to_server, 4, text, sizeof text);
    post(*client, *op);
    REQUIRE(drive({server.get(), client.get()},
                  [&] { return op->completed && !server_sink.unexpected.empty(); }));
    CHECK(op->error == 0);
    CHECK(server_sink.unexpected.front().size == static_cast<bmi_size_t>(sizeof text));
}

TEST_CASE("an OrangeFS server still needs its port", "[tcp][dialect]") {
    TestSink sink;
    std::unique_ptr<Method> server;
    CHECK(make_server(sink, "tcp://127.0.0.1", ApiDialect::orangefs, server) == -BMI_EINVAL);
    CHECK_FALSE(server);
    CHECK(make_server(sink, "tcp://127.0.0.1:", ApiDialect::standalone, server) == -BMI_EINVAL);
}

TEST_CASE("tcp_legacy_framing takes three words and names itself otherwise", "[tcp][dialect]") {
    for (const char* word : {"dialect", "orangefs", "standalone"}) {
        Config config;
        CHECK(config.settings.load(std::string("tcp_legacy_framing=") + word) == 0);
    }
    Config config;
    CHECK(config.settings.load("tcp_legacy_framing=mercury") == -BMI_EINVAL);
    CHECK_FALSE(config.settings.valid(bmi::support::SettingId::tcp_legacy_framing));
}
