// SPDX-License-Identifier: LGPL-2.1-or-later
// A listener whose process has run out of file descriptors: a client that connects then is
// refused with a reason its operations report (-BMI_ECONNREFUSED, and one warning on each
// side), not left waiting while the listener spins on a connection it cannot accept, nor
// blamed for a malformed hello; the peer already served is untouched, and once descriptors
// are free again the same client gets in.
#include <catch2/catch.hpp>

#include "full_table.hpp"
#include "harness.hpp"
#include "hostile_peer.hpp"
#include "methods/shm/shm_wire.hpp"
#include "tests/captured_stderr.hpp"

#include <string>
#include <string_view>

using namespace bmi;
using namespace bmi::test;

namespace {
std::size_t count_lines(const std::string& log, std::string_view words) {
    std::size_t n = 0;
    for (std::size_t at = 0, end; at < log.size(); at = end + 1) {
        end = log.find('\n', at);
        if (end == std::string::npos) end = log.size();
        if (log.substr(at, end - at).find(words) != std::string::npos) ++n;
    }
    return n;
}
}  // namespace

TEST_CASE("shm: a listener out of descriptors refuses a new client with a reason and keeps "
          "serving its peers",
          "[shm][descriptors]") {
    // 0: the listener cannot even accept the socket (it takes it with the descriptor it keeps
    // in reserve, to answer); 1: it accepts it, but the three descriptors of the hello do not
    // fit. The newcomer speaks the protocol by hand, so it opens nothing once the table is
    // full and reads the answer itself.
    const int spare = GENERATE(0, 1);
    Pair pair = make_peers("shm");
    BMI_addr_t served = introduce(pair);
    HostilePeer newcomer(pair.server.instance->listen_addresses().substr(6));
    REQUIRE(newcomer.send_hello(64, 256));
    {
        CapturedStderr captured;
        FullTable full(spare);
        Pump pump(*pair.server.instance);
        method::shm::HelloReply reply{};
        REQUIRE_FALSE(newcomer.await_reply(5000, &reply));
        CHECK(reply.status == -BMI_EMFILE);
        REQUIRE(newcomer.await_close(5000));
        // One refusal, one warning: the kit's when the listener could not accept, shm's when
        // the hello's descriptors did not fit.
        const std::string log = captured.stop();
        INFO(log);
        CHECK(count_lines(log, "out of file descriptors") == 1);
        CHECK(count_lines(log, spare == 0 ? "refusing new connections" : "the hello of pid") == 1);
        // The served client's messages still arrive.
        const char ping[] = "still here";
        auto request = unexpected_request(pair.client, pair.server_addr, ping, sizeof ping, 4);
        REQUIRE(post_and_wait(pair.client, request).error == 0);
        auto got = wait_unexpected(pair.server);
        CHECK(got.addr == served);
        CHECK(got.tag == 4);
        REQUIRE(pair.server.instance->unexpected_free(got.buffer) == 0);
    }
    // Descriptors free again: the next one gets in.
    Pump pump(*pair.server.instance);
    HostilePeer later(pair.server.instance->listen_addresses().substr(6));
    REQUIRE(later.send_hello(64, 256));
    REQUIRE(later.await_reply(5000));
}

TEST_CASE("shm: a libbmi client refused for want of the listener's descriptors fails its "
          "operations with -BMI_ECONNREFUSED, then gets in",
          "[shm][descriptors]") {
    Pair pair = make_peers("shm");
    Side newcomer;
    core::InitParams params;
    params.method_list = "bmi_shm";
    REQUIRE(core::Instance::create(params, newcomer.instance) == 0);
    REQUIRE(newcomer.instance->open_context(newcomer.context) == 0);
    BMI_addr_t server = 0;
    REQUIRE(newcomer.instance->addr_lookup(pair.server.instance->listen_addresses(), server) == 0);
    const char hello[] = "let me in";
    auto request = unexpected_request(newcomer, server, hello, sizeof hello, 3);
    char answer[16];
    bmi_op_id_t id = 0;
    {
        // A send connects and sends the hello at once; the socket waits in the listener's
        // backlog until the listener progresses, with its table full. The send completes
        // into the newcomer's own ring at once (as a tcp send completes into the socket
        // buffer); the receive stays pending until the connection's fate is known.
        REQUIRE(newcomer.instance->post(recv_request(newcomer, server, answer, sizeof answer, 5),
                                        id, nullptr) == 0);
        bmi_op_id_t sent = 0;
        REQUIRE(newcomer.instance->post(request, sent, nullptr) == 1);
        FullTable full(0);
        Pump pump(*pair.server.instance);
        REQUIRE(wait_op(newcomer, id, 5000).error == -BMI_ECONNREFUSED);
    }
    Pump pump(*pair.server.instance);
    REQUIRE(post_and_wait(newcomer, request).error == 0);
    auto got = wait_unexpected(pair.server);
    CHECK(got.tag == 3);
    REQUIRE(pair.server.instance->unexpected_free(got.buffer) == 0);
}
