// SPDX-License-Identifier: LGPL-2.1-or-later
// A process of the same user that announces the listen name of a legitimate client is not that
// client (SPEC §6): without the key an accepted connection is a peer of its own, so it neither
// receives what the server sends to the client nor completes receives posted for the client.
// The imposter is a forked process (child_process.hpp) that speaks the wire by hand.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "child_process.hpp"
#include "harness.hpp"
#include "hostile_peer.hpp"
#include "methods/shm/shm_wire.hpp"

using namespace bmi;
using namespace bmi::test;
using method::shm::MsgType;

namespace {
const char forged[] = "forged";
const char genuine[] = "genuine";
constexpr bmi_msg_tag_t tag = 7;

std::string unique_name(const char* role) {
    return std::string("named-") + std::to_string(getpid()) + "-" + role;
}

Side listening(const std::string& name) {
    core::InitParams params;
    params.listen = "shm://" + name;
    params.flags = BMI_INIT_SERVER;
    Side side;
    REQUIRE(core::Instance::create(params, side.instance) == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    return side;
}

// Once told, connects to `server` announcing `claimed`, publishes a forged message on `tag`
// if asked, reports 'h' after the server's reply, then 'm' if the server put a message in
// its ring within 3 s, 'n' if not ('e': it could not connect).
Child imposter(const std::string& server, const std::string& claimed, bool publish) {
    return Child([server, claimed, publish](int to_parent, auto&& park) {
        park();
        HostilePeer peer(server);
        peer.announce(claimed);
        if (!peer.connected() || !peer.send_hello(64, 1024) || !peer.await_reply(5000)) {
            report(to_parent, 'e');
            return 1;
        }
        if (publish && !peer.publish(MsgType::eager, tag, sizeof forged, forged, sizeof forged))
            report(to_parent, 'e');
        report(to_parent, 'h');
        report(to_parent, peer.message_within(3000) ? 'm' : 'n');
        park();
        return 0;
    });
}

// The op's completion, or nullopt if it did not complete within deadline_ms.
std::optional<core::Completion> completion_within(Side& side, bmi_op_id_t id, int deadline_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        int outcount = 0;
        core::Completion done;
        REQUIRE(side.instance->test(id, side.context, 10, outcount, done) == 0);
        if (outcount == 1) return done;
    }
    return std::nullopt;
}
}  // namespace

TEST_CASE("an unproven name does not complete receives posted for its holder", "[shm][hostile]") {
    const std::string server_name = unique_name("server"), client_name = unique_name("client");
    Child child = imposter(server_name, client_name, true);  // forked before any thread
    Side server = listening(server_name);
    Side client = listening(client_name);
    Pump client_pump(*client.instance);
    BMI_addr_t server_addr = 0;
    REQUIRE(client.instance->addr_lookup("shm://" + server_name, server_addr) == 0);
    int hello = 1;
    auto introduce = unexpected_request(client, server_addr, &hello, sizeof hello, 1);
    bmi_op_id_t id = 0;
    REQUIRE(client.instance->post(introduce, id, nullptr) >= 0);
    const auto got = wait_unexpected(server);
    REQUIRE(server.instance->unexpected_free(got.buffer) == 0);
    const BMI_addr_t legitimate = got.addr;

    char buffer[64] = {};
    bmi_op_id_t receive = 0;
    REQUIRE(server.instance->post(recv_request(server, legitimate, buffer, sizeof buffer, tag),
                                  receive, nullptr) == 0);
    {
        Pump server_pump(*server.instance);
        child.tell();
        REQUIRE(child.wait_report() == 'h');
    }
    // The forged message is the imposter's own: it completes nothing posted for the client.
    CHECK_FALSE(completion_within(server, receive, 500));
    bmi_op_id_t sent = 0;
    REQUIRE(client.instance->post(send_request(client, server_addr, genuine, sizeof genuine, tag),
                                  sent, nullptr) >= 0);
    const auto done = completion_within(server, receive, 5000);
    REQUIRE(done);
    CHECK(done->error == 0);
    CHECK(std::strcmp(buffer, genuine) == 0);
}

TEST_CASE("an unproven name does not receive what is sent to its holder", "[shm][hostile]") {
    const std::string server_name = unique_name("server2"), client_name = unique_name("client2");
    Child child = imposter(server_name, client_name, false);  // forked before any thread
    Side server = listening(server_name);
    Side client = listening(client_name);
    BMI_addr_t legitimate = 0;  // the client's listen name, as the server looks it up
    REQUIRE(server.instance->addr_lookup("shm://" + client_name, legitimate) == 0);
    {
        Pump server_pump(*server.instance);
        child.tell();
        REQUIRE(child.wait_report() == 'h');
    }
    auto secret = unexpected_request(server, legitimate, genuine, sizeof genuine, tag);
    bmi_op_id_t sent = 0;
    REQUIRE(server.instance->post(secret, sent, nullptr) >= 0);
    {
        Pump server_pump(*server.instance);
        const auto got = wait_unexpected(client, 5000);
        CHECK(std::strcmp(static_cast<const char*>(got.buffer), genuine) == 0);
        REQUIRE(client.instance->unexpected_free(got.buffer) == 0);
        CHECK(child.wait_report() == 'n');  // nothing reached the imposter's ring
    }
}
