// SPDX-License-Identifier: LGPL-2.1-or-later
// What the API dialect changes in the tcp method, over real sockets on 127.0.0.1: message
// classes on v2 frames, a listen address without a port, and the legacy framing setting.
#include <catch2/catch.hpp>

#include <string>

#include <unistd.h>

#include "methods/tcp/tcp_method.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "tcp_raw_peer.hpp"
#include "tcp_test_harness.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
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

std::vector<std::uint8_t> standalone_frame(std::uint32_t magic, Mode mode, bmi_msg_tag_t tag,
                                           std::size_t size, std::uint8_t msg_class) {
    std::vector<std::uint8_t> frame(standalone_header_size + size, 0x42);
    Header h;
    h.magic = magic;
    h.mode = mode;
    h.tag = wire_tag(tag);
    h.size = size;
    h.address_hash = 0xdeadbeef;  // a claim the server must not act on
    h.msg_class = msg_class;
    encode_header(h, Framing::standalone, frame.data());
    return frame;
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
        REQUIRE(
            pair.run([&] { return op->completed && pair.server_sink.unexpected.size() > before; }));
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
    CHECK_FALSE(config.settings.valid(bmi::method::tcp::SettingId::legacy_framing));
}

TEST_CASE("a standalone legacy client gets OrangeFS's limits and keeps its magic",
          "[tcp][dialect][legacy]") {
    TestSink sink;
    std::unique_ptr<Method> server;
    REQUIRE(make_server(sink, "tcp://127.0.0.1:0", ApiDialect::orangefs, server) == 0);
    const int fd = raw_connect(port_from(server->listen_address()));
    REQUIRE(fd >= 0);
    auto first = standalone_frame(standalone_magic, Mode::unexpected, 5, 6, 9);
    REQUIRE(raw_write(fd, first.data(), first.size(), *server));
    REQUIRE(drive({server.get()}, [&] { return !sink.unexpected.empty(); }));
    CHECK(sink.unexpected.front().msg_class == 9);
    CHECK(sink.unexpected.front().size == 6);
    const auto peer = sink.unexpected.front().peer;
    // Known legacy now: a receive no such peer can fill is refused when posted.
    auto huge = make_op(OpKind::recv, peer, 4, nullptr, legacy_message_limit + 1);
    CHECK(post(*server, *huge) == -BMI_EINVAL);
    auto fits = make_op(OpKind::recv, peer, 4, nullptr, legacy_message_limit);
    CHECK(post(*server, *fits) == 0);
    // OrangeFS's magic on a connection in the standalone framing closes it.
    auto other = standalone_frame(wire_magic, Mode::eager, 4, 10, 0);
    REQUIRE(raw_write(fd, other.data(), other.size(), *server));
    CHECK(raw_closed(fd, *server));
    CHECK(drive({server.get()}, [&] { return fits->completed; }));
    CHECK(fits->error == -BMI_EPROTO);
    close(fd);
}

TEST_CASE("tcp's limits come from its rows, and Limits repeats no default", "[tcp][settings]") {
    // A default written in Limits too would be a second copy that can drift from the row.
    const Limits unset;
    CHECK(unset.stall_timeout.count() == 0);
    CHECK(unset.rendezvous_timeout.count() == 0);
    CHECK(unset.send_timeout.count() == 0);
    CHECK(unset.setup_timeout.count() == 0);
    CHECK(unset.pending_per_source == 0);
    CHECK(unset.early.peer_bytes == EarlyBudget::Limits{}.peer_bytes);  // unbounded until set
    CHECK(unset.grants.total_bytes == EarlyBudget::Limits{}.total_bytes);

    const auto row_default = [](SettingId id) {
        const auto& row = setting_spec(id);
        return *bmi::support::parse_setting(row, row.default_text);
    };
    const Config config;  // every row at its default
    Limits limits;
    load_limits(config.settings, limits);
    CHECK(limits.early.peer_bytes == row_default(SettingId::early_peer_bytes));
    CHECK(limits.grants.total_bytes == row_default(SettingId::grant_total_bytes));
    CHECK(limits.setup_timeout.count() == row_default(SettingId::setup_timeout));
    CHECK(static_cast<std::int64_t>(limits.pending_per_source) ==
          row_default(SettingId::pending_per_source));
}
