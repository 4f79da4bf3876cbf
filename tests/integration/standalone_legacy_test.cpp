// SPDX-License-Identifier: LGPL-2.1-or-later
// libbmi against a peer that speaks only the standalone BMI library's legacy tcp framing
// (standalone_peer.c, a separate process): as its server under either API dialect, and as its
// client, falling back from HELLO to the 25-byte framing (or, told to use OrangeFS's, failing
// clearly instead of hanging).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bmi/core/instance.hpp"
#include "process_harness.hpp"
#include "standalone_peer.h"

using namespace std::chrono_literals;
using bmi::core::Instance;
using bmi::integration::Process;
using bmi::integration::program_from_env;
using bmi::method::ApiDialect;
using bmi::method::OpKind;

namespace {

std::vector<std::uint8_t> pattern(std::size_t size, int tag) {
    std::vector<std::uint8_t> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<std::uint8_t>((i * 7 + tag) & 0xff);
    return v;
}

std::unique_ptr<Instance> instance(ApiDialect dialect, const std::string& listen,
                                   const std::string& options = "") {
    bmi::core::InitParams params;
    params.method_list = "bmi_tcp";
    params.listen = listen;
    params.flags = listen.empty() ? 0 : BMI_INIT_SERVER;
    params.options = options;
    params.dialect = dialect;
    std::unique_ptr<Instance> out;
    REQUIRE(Instance::create(params, out) == 0);
    return out;
}

// Posts and waits up to 10 s; the op's error (or -BMI_ETIMEDOUT), actual size in *actual.
int run_op(Instance& bmi, bmi_context_id ctx, OpKind kind, BMI_addr_t to, int tag,
           std::vector<std::uint8_t>& buffer, std::uint8_t msg_class = 0,
           bmi_size_t* actual = nullptr) {
    bmi::core::PostRequest r;
    r.kind = kind;
    r.addr = to;
    r.buffer = buffer.data();
    r.size = static_cast<bmi_size_t>(buffer.size());
    r.tag = tag;
    r.msg_class = msg_class;
    r.context = ctx;
    bmi_op_id_t id = 0;
    bmi_size_t size = 0;
    int rc = bmi.post(r, id, &size);
    if (rc < 0) return rc;
    if (rc == 0) {
        bmi::core::Completion done;
        int outcount = 0;
        for (int i = 0; i < 100 && outcount == 0; ++i)
            if (int t = bmi.test(id, ctx, 100, outcount, done); t < 0) return t;
        if (outcount == 0) return -BMI_ETIMEDOUT;
        if (done.error != 0) return done.error;
        size = done.actual_size;
    }
    if (actual) *actual = size;
    return 0;
}

// The peer as a client of a libbmi server of `dialect`: every message arrives intact with its
// class, and both replies reach the peer intact (it checks them and says OK).
void serve_standalone_client(ApiDialect dialect) {
    auto server = instance(dialect, "tcp://127.0.0.1:0");
    bmi_context_id ctx = 0;
    REQUIRE(server->open_context(ctx) == 0);
    Process peer = Process::spawn(
        {program_from_env("BMI_STANDALONE_PEER"), "client", server->listen_addresses()});

    std::map<int, bmi::core::UnexpectedMessage> unexpected;
    for (int i = 0; i < 100 && unexpected.size() < 2; ++i) {
        bmi::core::UnexpectedMessage m[2];
        int outcount = 0;
        REQUIRE(server->testunexpected(100, outcount, m) == 0);
        for (int k = 0; k < outcount; ++k) unexpected[m[k].tag] = m[k];
    }
    REQUIRE(unexpected.size() == 2);
    CHECK(unexpected[SP_TAG_UNEXP_A].msg_class == SP_CLASS_A);
    CHECK(unexpected[SP_TAG_UNEXP_B].msg_class == SP_CLASS_B);
    const BMI_addr_t from = unexpected[SP_TAG_UNEXP_A].addr;
    for (auto& [tag, m] : unexpected) {
        CHECK(m.addr == from);
        const auto* p = static_cast<const std::uint8_t*>(m.buffer);
        CHECK(std::vector<std::uint8_t>(p, p + m.size) == pattern(SP_SIZE_UNEXP, tag));
        server->unexpected_free(m.buffer);
    }
    for (auto [tag, size] :
         {std::pair{SP_TAG_EAGER, SP_SIZE_EAGER}, std::pair{SP_TAG_LARGE, SP_SIZE_LARGE}}) {
        std::vector<std::uint8_t> got(SP_SIZE_LARGE);
        bmi_size_t actual = 0;
        REQUIRE(run_op(*server, ctx, OpKind::recv, from, tag, got, 0, &actual) == 0);
        got.resize(static_cast<std::size_t>(actual));
        CHECK(got == pattern(static_cast<std::size_t>(size), tag));
    }
    auto eager = pattern(SP_SIZE_EAGER, SP_TAG_REPLY_EAGER);
    auto large = pattern(SP_SIZE_LARGE, SP_TAG_REPLY_LARGE);
    CHECK(run_op(*server, ctx, OpKind::send, from, SP_TAG_REPLY_EAGER, eager) == 0);
    CHECK(run_op(*server, ctx, OpKind::send, from, SP_TAG_REPLY_LARGE, large) == 0);
    auto status = peer.wait(20s);
    REQUIRE(status);
    CHECK(*status == 0);
    CHECK(peer.unread_output().find("OK") != std::string::npos);
    server->close_context(ctx);
}

}  // namespace

TEST_CASE("a standalone legacy client reaches a standalone-dialect server", "[integration]") {
    serve_standalone_client(ApiDialect::standalone);
}

TEST_CASE("a standalone legacy client reaches an OrangeFS-dialect server too", "[integration]") {
    serve_standalone_client(ApiDialect::orangefs);
}

TEST_CASE("a standalone-dialect client falls back to the 25-byte framing", "[integration]") {
    Process acceptor = Process::spawn({program_from_env("BMI_STANDALONE_PEER"), "acceptor"});
    auto address = acceptor.read_address(10s);
    REQUIRE(address);
    auto client = instance(ApiDialect::standalone, "");
    bmi_context_id ctx = 0;
    REQUIRE(client->open_context(ctx) == 0);
    BMI_addr_t server = 0;
    REQUIRE(client->addr_lookup(*address, server) == 0);

    auto unexp = pattern(SP_SIZE_UNEXP, SP_TAG_UNEXP_A);
    auto eager = pattern(SP_SIZE_EAGER, SP_TAG_EAGER);
    auto large = pattern(SP_SIZE_LARGE, SP_TAG_LARGE);
    CHECK(run_op(*client, ctx, OpKind::send_unexpected, server, SP_TAG_UNEXP_A, unexp,
                 SP_CLASS_B) == 0);
    CHECK(run_op(*client, ctx, OpKind::send, server, SP_TAG_EAGER, eager) == 0);
    CHECK(run_op(*client, ctx, OpKind::send, server, SP_TAG_LARGE, large) == 0);
    std::vector<std::uint8_t> reply(100);
    bmi_size_t actual = 0;
    CHECK(run_op(*client, ctx, OpKind::recv, server, SP_TAG_REPLY_EAGER, reply, 0, &actual) == 0);
    CHECK(actual == SP_SIZE_UNEXP);

    // HELLO was dropped at the magic check, with nothing reported; then every message whole.
    std::vector<std::string> lines;
    while (auto line = acceptor.read_line(10s)) {
        lines.push_back(*line);
        if (*line == "DONE") break;
    }
    const std::vector<std::string> expected = {
        "REJECTED", "MSG 2 1 6 2 ok", "MSG 4 10 16384 0 ok", "MSG 8 11 1048576 0 ok", "DONE",
    };
    CHECK(lines == expected);
    client->close_context(ctx);
    client.reset();  // closes the connection: the acceptor exits
    auto status = acceptor.wait(20s);
    REQUIRE(status);
    CHECK(*status == 0);
}

TEST_CASE("told to use OrangeFS framing, the same client fails clearly", "[integration]") {
    // One refusal ends it: in OrangeFS framing the client sends no HELLO, only its messages
    // with the upgrade offer, and a peer that closes on them is not retried.
    Process acceptor = Process::spawn({program_from_env("BMI_STANDALONE_PEER"), "acceptor", "1"});
    auto address = acceptor.read_address(10s);
    REQUIRE(address);
    auto client = instance(ApiDialect::standalone, "", "tcp_legacy_framing=orangefs");
    bmi_context_id ctx = 0;
    REQUIRE(client->open_context(ctx) == 0);
    BMI_addr_t server = 0;
    REQUIRE(client->addr_lookup(*address, server) == 0);
    // The sends may fit in the socket buffers before the acceptor closes; the receive of its
    // answer cannot complete, and must fail rather than wait.
    auto unexp = pattern(SP_SIZE_UNEXP, SP_TAG_UNEXP_A);
    const int sent = run_op(*client, ctx, OpKind::send_unexpected, server, SP_TAG_UNEXP_A, unexp);
    CHECK((sent == 0 || sent == -BMI_ECONNRESET));
    std::vector<std::uint8_t> reply(100);
    CHECK(run_op(*client, ctx, OpKind::recv, server, SP_TAG_REPLY_EAGER, reply) == -BMI_ECONNRESET);
    auto status = acceptor.wait(20s);
    REQUIRE(status);
    CHECK(*status == 3);  // one connection refused at its magic check: 51903
    client->close_context(ctx);
}
