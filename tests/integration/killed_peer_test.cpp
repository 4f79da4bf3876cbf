// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer that dies (SIGKILL) or stops in the middle of a large message: the receiver's posted
// receive must complete with an error within 10 s (SPEC 1: failures complete in bounded time).
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "process_harness.hpp"

using namespace std::chrono_literals;
using bmi::integration::Process;
using bmi::integration::program_from_env;

namespace {

struct StuckPair {
    Process server;
    Process client;
};

// Starts killed_peer_server and the given client, and brings them to the state under test:
// the server's receive for SIZE bytes is posted, the client is alive but will send no more.
// nullopt (with a warning) if the client's send finished before it could stall.
std::optional<StuckPair> start_stuck_pair(const std::string& client_exe, const std::string& size) {
    const std::string server_exe = program_from_env("BMI_KILLED_PEER_SERVER");
    Process server = Process::spawn({server_exe, "tcp://127.0.0.1:0", size, "20000"}, true);
    auto addr = server.read_address(10s);
    REQUIRE(addr);

    Process client = Process::spawn({client_exe, *addr, size});
    auto client_state = client.read_line(20s);
    REQUIRE(client_state);
    if (client_state->rfind("COMPLETED", 0) == 0) {
        // The whole message fit before the client stalled: there is no "mid-message" to test.
        WARN("the send finished before the peer could stall: " << *client_state);
        return std::nullopt;
    }
    REQUIRE(client_state->rfind("STALLED", 0) == 0);
    REQUIRE(server.read_line(20s) == std::optional<std::string>("HELLO"));
    REQUIRE(server.write_stdin("post\n"));
    REQUIRE(server.read_line(20s) == std::optional<std::string>("POSTED"));
    return StuckPair{std::move(server), std::move(client)};
}

// Waits for the server's verdict; returns its "RESULT ..." line. Checks it took under 10 s.
std::string server_verdict(Process& server, std::chrono::steady_clock::time_point since) {
    auto status = server.wait(30s);
    auto took = std::chrono::steady_clock::now() - since;
    REQUIRE(status);
    INFO("server said: " << server.unread_output());
    CHECK(*status == 0);
    CHECK(took < 10s);
    return server.unread_output();
}

void kill_peer_mid_message(const std::string& client_exe, const std::string& size) {
    auto pair = start_stuck_pair(client_exe, size);
    if (!pair) return;
    pair->client.kill(SIGKILL);
    auto killed_at = std::chrono::steady_clock::now();
    auto client_status = pair->client.wait(10s);
    REQUIRE(client_status);
    CHECK(*client_status == 128 + SIGKILL);
    CHECK(server_verdict(pair->server, killed_at).rfind("RESULT failed", 0) == 0);
}

// Sets an environment variable for the children spawned during one test.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedEnv() { ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
};

}  // namespace

TEST_CASE("a libbmi peer killed during a 64 MiB send fails the posted receive", "[integration]") {
    kill_peer_mid_message(program_from_env("BMI_KILLED_PEER_CLIENT"), std::to_string(64 << 20));
}

TEST_CASE("a legacy-protocol peer killed mid-payload fails the posted receive", "[integration]") {
    // 8 MiB stays under the 16 MiB legacy message cap.
    kill_peer_mid_message(program_from_env("BMI_LEGACY_PEER_CLIENT"), std::to_string(8 << 20));
}

TEST_CASE("a peer that stops mid-payload without dying times out the posted receive",
          "[integration]") {
    ScopedEnv stall("BMI_TCP_STALL_TIMEOUT_MS", "1500");
    auto pair =
        start_stuck_pair(program_from_env("BMI_LEGACY_PEER_CLIENT"), std::to_string(8 << 20));
    REQUIRE(pair);
    auto verdict = server_verdict(pair->server, std::chrono::steady_clock::now());
    CHECK(verdict.rfind("RESULT failed", 0) == 0);
    CHECK(verdict.find("BMI_ETIMEDOUT") != std::string::npos);
    // pair->client is still alive; its destructor SIGKILLs it.
}
