// SPDX-License-Identifier: LGPL-2.1-or-later
// The examples/ programs as real peers: pvfs_server with many concurrent pvfs_clients, and the
// C++ hello pair.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <utility>

#include <string>
#include <vector>

#include "../unit/key_files.hpp"
#include "process_harness.hpp"

using namespace std::chrono_literals;
using bmi::integration::Process;
using bmi::integration::program_from_env;

namespace {

// Response sizes around the interesting edges: header only, eager, the 16 KiB unexpected and
// eager limits, and large rendezvous transfers.
const std::vector<std::string> response_sizes = {"24",    "100",   "4096",   "16384",
                                                 "16385", "65536", "262144", "1048576"};

// The process ends by itself within `timeout`, successfully.
void expect_clean_exit(Process& process, std::chrono::seconds timeout) {
    auto status = process.wait(timeout);
    REQUIRE(status);
    CHECK(*status == 0);
}

}  // namespace

TEST_CASE("pvfs_server answers concurrent clients and shuts down cleanly", "[integration]") {
    const std::string server_exe = program_from_env("BMI_PVFS_SERVER");
    const std::string client_exe = program_from_env("BMI_PVFS_CLIENT");

    Process server = Process::spawn({server_exe, "tcp://127.0.0.1:0"});
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    INFO("server address " << *addr);

    std::vector<Process> clients;
    for (const auto& size : response_sizes)
        clients.push_back(Process::spawn(
            {client_exe, "--iterations", "200", "--size", size, "--timeout-ms", "30000", *addr}));
    for (std::size_t i = 0; i < clients.size(); ++i) {
        INFO("client " << i << " with responses of " << response_sizes[i] << " bytes");
        auto status = clients[i].wait(90s);
        REQUIRE(status);
        CHECK(*status == 0);
        CHECK(clients[i].unread_output().rfind("OK 200/200 requests", 0) == 0);
    }

    Process stopper = Process::spawn({client_exe, "--iterations", "1", "--shutdown", *addr});
    auto stopper_status = stopper.wait(30s);
    REQUIRE(stopper_status);
    CHECK(*stopper_status == 0);

    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);
    // 8 x 200 requests and 8 goodbyes, one more request from the stopper, and its shutdown
    // request, each of whose references was given back. The clients that left lost their
    // addresses; the stopper may still be connected when the server counts.
    const std::string output = server.unread_output();
    INFO("server said: " << output);
    CHECK(output.find("DONE requests=1610 answered=1610 failed=0 released=1610 addresses=") !=
          std::string::npos);
    CHECK((output.find("addresses=0\n") != std::string::npos ||
           output.find("addresses=1\n") != std::string::npos));
}

TEST_CASE("SIGTERM stops pvfs_server cleanly over every method built", "[integration]") {
    // The server's own handler must see the signal over each method, ofi included: a library
    // the method loads (libinfinipath, linked by Debian's libfabric) takes SIGTERM for itself.
    const std::string methods = program_from_env("BMI_ENABLED_METHODS");
    std::vector<std::string> listens;
    if (methods.find("tcp") != std::string::npos) listens.push_back("tcp://127.0.0.1:0");
    if (methods.find("shm") != std::string::npos)
        listens.push_back("shm://bmi-sigterm-" + std::to_string(getpid()));
    if (methods.find("ofi") != std::string::npos) listens.push_back("ofi+tcp://127.0.0.1:0");
    for (const auto& listen : listens) {
        INFO("listening on " << listen);
        Process server = Process::spawn({program_from_env("BMI_PVFS_SERVER"), listen});
        auto addr = server.read_address(10s);
        REQUIRE(addr);
        Process client = Process::spawn(
            {program_from_env("BMI_PVFS_CLIENT"), "--iterations", "3", "--size", "100", *addr});
        expect_clean_exit(client, 60s);
        server.kill(SIGTERM);
        expect_clean_exit(server, 20s);
        const std::string output = server.unread_output();
        INFO("server said: " << output);
        // Three requests and the goodbye.
        CHECK(output.find("DONE requests=4 answered=4 failed=0") != std::string::npos);
    }
}

TEST_CASE("pvfs_server stops after --max-requests and a late client fails cleanly",
          "[integration]") {
    const std::string server_exe = program_from_env("BMI_PVFS_SERVER");
    const std::string client_exe = program_from_env("BMI_PVFS_CLIENT");

    Process server = Process::spawn({server_exe, "--max-requests", "5", "tcp://127.0.0.1:0"});
    auto addr = server.read_address(10s);
    REQUIRE(addr);

    Process client = Process::spawn({client_exe, "--iterations", "5", *addr});
    auto status = client.wait(30s);
    REQUIRE(status);
    CHECK(*status == 0);
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);

    // Nobody listens any more: the client must report an error in bounded time, not hang.
    Process late = Process::spawn({client_exe, "--iterations", "1", "--timeout-ms", "5000", *addr});
    auto late_status = late.wait(30s);
    REQUIRE(late_status);
    CHECK(*late_status == 1);
    CHECK(late.unread_output().rfind("FAIL 0/1", 0) == 0);
}

namespace {

// The C++ hello pair: a server listening where `listen` says ("" = its default), a client of
// `greetings` greetings, and the server done after the client's bye.
void run_hello_pair(const std::string& listen, int greetings) {
    const std::string exe = program_from_env("BMI_HELLO");
    std::vector<std::string> server_args{exe, "server"};
    if (!listen.empty()) server_args.push_back(listen);
    Process server = Process::spawn(server_args);
    auto addr = server.read_address(10s);
    REQUIRE(addr);

    Process client = Process::spawn({exe, "client", *addr, std::to_string(greetings)});
    auto status = client.wait(30s);
    REQUIRE(status);
    CHECK(*status == 0);
    CHECK(client.unread_output() == "OK " + std::to_string(greetings) + " greetings answered\n");
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);
    CHECK(server.unread_output() == "DONE\n");
}

}  // namespace

TEST_CASE("hello (C++ API) server answers a client and stops on bye", "[integration]") {
    run_hello_pair("", 50);
}

TEST_CASE("the examples pick the method their address names", "[integration]") {
    const std::string server_exe = program_from_env("BMI_PVFS_SERVER");
    const std::string client_exe = program_from_env("BMI_PVFS_CLIENT");
    const std::string enabled = program_from_env("BMI_ENABLED_METHODS");
    if (enabled.find("shm") == std::string::npos) return;
    // No --methods anywhere: "shm://..." alone must be enough (it used to fail with a bare
    // BMI_ENOPROTOOPT because the examples asked for bmi_tcp only).
    const std::string listen = "shm://examples-" + std::to_string(getpid());
    Process server = Process::spawn({server_exe, listen});
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    CHECK(addr->rfind("shm://", 0) == 0);
    Process client =
        Process::spawn({client_exe, "--iterations", "50", "--size", "65536", "--shutdown", *addr});
    auto status = client.wait(60s);
    REQUIRE(status);
    CHECK(*status == 0);
    CHECK(client.unread_output().rfind("OK 50/50 requests", 0) == 0);
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);
}

namespace {
// The example server and client when this build has the ofi method; empty names otherwise.
std::pair<std::string, std::string> ofi_examples() {
    if (program_from_env("BMI_ENABLED_METHODS").find("ofi") == std::string::npos) return {};
    return {program_from_env("BMI_PVFS_SERVER"), program_from_env("BMI_PVFS_CLIENT")};
}
}  // namespace

TEST_CASE("the examples run over ofi with an ofi+tcp address alone", "[integration]") {
    const auto [server_exe, client_exe] = ofi_examples();
    if (server_exe.empty()) return;  // no ofi in this build
    Process server = Process::spawn({server_exe, "ofi+tcp://127.0.0.1:0"});
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    CHECK(addr->rfind("ofi+tcp://127.0.0.1:", 0) == 0);
    // An eager size and a rendezvous size, from two clients at once; then one that stops the
    // server, once both are done (a server stopped under a client fails that client).
    Process small = Process::spawn({client_exe, "--iterations", "30", "--size", "4096", *addr});
    Process large = Process::spawn({client_exe, "--iterations", "10", "--size", "1048576", *addr});
    for (Process* client : {&small, &large}) {
        auto status = client->wait(60s);
        REQUIRE(status);
        CHECK(*status == 0);
        CHECK(client->unread_output().rfind("OK ", 0) == 0);
    }
    Process last =
        Process::spawn({client_exe, "--iterations", "1", "--size", "24", "--shutdown", *addr});
    auto last_status = last.wait(30s);
    REQUIRE(last_status);
    CHECK(*last_status == 0);
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);

    run_hello_pair("ofi+tcp://127.0.0.1:0", 20);
}

TEST_CASE("an ofi+shm name a killed server held can be listened on again", "[integration]") {
    const auto [server_exe, client_exe] = ofi_examples();
    if (server_exe.empty()) return;  // no ofi in this build
    const std::string name = "bmi-killed-" + std::to_string(getpid());
    const std::string address = "ofi+shm://" + name;
    const std::string region = "/dev/shm/" + name;
    {
        Process first = Process::spawn({server_exe, address});
        REQUIRE(first.read_address(10s));
        REQUIRE(access(region.c_str(), F_OK) == 0);
        // While it lives the name is taken.
        Process second = Process::spawn({server_exe, address});
        auto refused = second.wait(20s);
        REQUIRE(refused);
        CHECK(*refused != 0);
        first.kill(SIGKILL);
        REQUIRE(first.wait(10s));
    }
    // Its region is left behind; the next server takes the name and serves.
    REQUIRE(access(region.c_str(), F_OK) == 0);
    Process next = Process::spawn({server_exe, address});
    auto addr = next.read_address(10s);
    REQUIRE(addr);
    Process client =
        Process::spawn({client_exe, "--iterations", "5", "--size", "4096", "--shutdown", *addr});
    expect_clean_exit(client, 30s);
    expect_clean_exit(next, 20s);
    // A clean close leaves nothing.
    CHECK(access(region.c_str(), F_OK) != 0);
}

namespace {
// Waits up to `limit` for the file at path to exist (present) or to be gone; whether it did.
bool file_shows(const std::string& path, bool present, std::chrono::seconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while ((access(path.c_str(), F_OK) == 0) != present) {
        if (std::chrono::steady_clock::now() >= give_up) return false;
        usleep(10000);
    }
    return true;
}

// Starts an ofi+shm client of server_address that runs until it is killed, kills it once its
// region (methods/ofi/ofi_address.hpp, shm_client_name) is in /dev/shm; that region's path.
std::string region_of_killed_client(const std::string& client_exe,
                                    const std::string& server_address) {
    Process doomed =
        Process::spawn({client_exe, "--iterations", "100000000", "--size", "64", server_address});
    const std::string region = "/dev/shm/bmi-" + std::to_string(doomed.pid()) + "-0";
    REQUIRE(file_shows(region, true, 10s));
    doomed.kill(SIGKILL);
    REQUIRE(doomed.wait(10s));
    return region;
}
}  // namespace

TEST_CASE("the region of a killed ofi+shm client is removed by the next process that opens one",
          "[integration]") {
    const auto [server_exe, client_exe] = ofi_examples();
    if (server_exe.empty()) return;  // no ofi in this build
    Process server =
        Process::spawn({server_exe, "ofi+shm://bmi-sweep-" + std::to_string(getpid())});
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    const std::string region = region_of_killed_client(client_exe, *addr);
    REQUIRE(access(region.c_str(), F_OK) == 0);
    {
        // With the sweep off (ofi_shm_sweep) a client leaves it.
        setenv("BMI_OFI_SHM_SWEEP", "0", 1);
        Process kept = Process::spawn({client_exe, "--iterations", "2", "--size", "64", *addr});
        unsetenv("BMI_OFI_SHM_SWEEP");
        expect_clean_exit(kept, 30s);
        CHECK(access(region.c_str(), F_OK) == 0);
    }
    // The next client removes it before it opens its own, and is served.
    Process client =
        Process::spawn({client_exe, "--iterations", "5", "--size", "4096", "--shutdown", *addr});
    expect_clean_exit(client, 30s);
    expect_clean_exit(server, 20s);
    CHECK(access(region.c_str(), F_OK) != 0);
}

TEST_CASE("an ofi+shm server removes the region of a client killed while it runs",
          "[integration]") {
    const auto [server_exe, client_exe] = ofi_examples();
    if (server_exe.empty()) return;  // no ofi in this build
    // The server's own sweep (ofi_shm_sweep_period_ms), short here; the clients never sweep.
    setenv("BMI_OFI_SHM_SWEEP_PERIOD_MS", "200", 1);
    Process server =
        Process::spawn({server_exe, "ofi+shm://bmi-period-" + std::to_string(getpid())});
    unsetenv("BMI_OFI_SHM_SWEEP_PERIOD_MS");
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    setenv("BMI_OFI_SHM_SWEEP", "0", 1);
    const std::string region = region_of_killed_client(client_exe, *addr);
    // Gone within a few periods, with no other ofi+shm process started meanwhile.
    CHECK(file_shows(region, false, 10s));
    // The server still serves.
    Process client =
        Process::spawn({client_exe, "--iterations", "5", "--size", "4096", "--shutdown", *addr});
    unsetenv("BMI_OFI_SHM_SWEEP");
    expect_clean_exit(client, 30s);
    expect_clean_exit(server, 20s);
}

TEST_CASE("an ofi server opens only the provider and domain its allocation names",
          "[integration]") {
    const auto [server_exe, client_exe] = ofi_examples();
    if (server_exe.empty()) return;  // no ofi in this build
    struct AllocationEnv {
        explicit AllocationEnv(const char* text) { setenv("BMI_ALLOCATION", text, 1); }
        ~AllocationEnv() { unsetenv("BMI_ALLOCATION"); }
    };
    {
        // On the plane: served, with the domain (loopback) and traffic class asked of rxm.
        AllocationEnv allocation("id=bmi.fab type=ofi plane=tcp/lo endpts=1 qos=cs1");
        Process server = Process::spawn({server_exe, "ofi+tcp://127.0.0.1:0"});
        auto addr = server.read_address(10s);
        REQUIRE(addr);
        Process client = Process::spawn(
            {client_exe, "--iterations", "5", "--size", "100000", "--shutdown", *addr});
        expect_clean_exit(client, 30s);
        expect_clean_exit(server, 20s);
    }
    for (const char* off_plane : {"id=bmi.fab type=ofi plane=shm endpts=1",
                                  "id=bmi.fab type=ofi plane=tcp/no-such-domain endpts=1"}) {
        // Another provider, or a domain this node has not: the server does not start.
        INFO(off_plane);
        AllocationEnv allocation(off_plane);
        Process server = Process::spawn({server_exe, "ofi+tcp://127.0.0.1:0"});
        auto status = server.wait(20s);
        REQUIRE(status);
        CHECK(*status != 0);
        CHECK(server.unread_output().find("ofi+tcp://") == std::string::npos);
    }
}

namespace {

// Runs the client with stderr folded into stdout; returns its exit status and all it printed.
std::pair<int, std::string> run_client_for_messages(const std::vector<std::string>& args) {
    std::string command = "exec";
    for (const auto& arg : args) command += " '" + arg + "'";
    Process client = Process::spawn({"/bin/sh", "-c", command + " 2>&1"});
    auto status = client.wait(30s);
    REQUIRE(status);
    return {*status, client.unread_output()};
}

// A TCP socket bound to an ephemeral port of 127.0.0.1; its address goes to addr.
int bound_loopback_socket(std::string& addr) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    addr = "tcp://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    return fd;
}

}  // namespace

TEST_CASE("a failing example client says what, where, why, and what to check", "[integration]") {
    const std::string client_exe = program_from_env("BMI_PVFS_CLIENT");

    SECTION("nothing listening") {
        std::string addr;
        ::close(bound_loopback_socket(addr));  // nothing listens there now
        auto [status, text] = run_client_for_messages(
            {client_exe, "--iterations", "1", "--timeout-ms", "5000", addr});
        INFO(text);
        CHECK(status == 1);
        CHECK(text.find(addr + " failed: BMI_ECONNREFUSED (Connection refused)") !=
              std::string::npos);
        CHECK(text.find("hint: is a server running at " + addr) != std::string::npos);
    }
    SECTION("an address whose method was not started") {
        auto [status, text] = run_client_for_messages(
            {client_exe, "--methods", "bmi_tcp", "--iterations", "1", "shm://nobody"});
        INFO(text);
        CHECK(status == 1);
        CHECK(text.find("looking up shm://nobody failed: BMI_") != std::string::npos);
        CHECK(text.find("hint: shm://nobody needs a method this process did not start") !=
              std::string::npos);
    }
    SECTION("a listener that never answers") {
        // Accepts (the kernel completes the connection) but never reads or writes.
        std::string addr;
        int fd = bound_loopback_socket(addr);
        REQUIRE(::listen(fd, 4) == 0);
        auto [status, text] = run_client_for_messages(
            {client_exe, "--iterations", "1", "--timeout-ms", "1000", addr});
        ::close(fd);
        INFO(text);
        CHECK(status == 1);
        CHECK(text.find("BMI_ETIMEDOUT (Connection timed out)") != std::string::npos);
        CHECK(text.find("hint: no answer from " + addr + " within 1000 ms") != std::string::npos);
    }
    SECTION(
        "a listener that never answers the key handshake: libbmi's deadline, not the client's") {
        bmi::test::KeyFiles keys;
        const std::string key = keys.write("key", std::vector<std::uint8_t>(32, 7));
        std::string addr;
        int fd = bound_loopback_socket(addr);
        REQUIRE(::listen(fd, 4) == 0);
        auto [status, text] = run_client_for_messages(
            {"env", "BMI_KEY_FILE=" + key, "BMI_TCP_SETUP_TIMEOUT_MS=500", client_exe,
             "--iterations", "1", "--timeout-ms", "20000", addr});
        ::close(fd);
        INFO(text);
        CHECK(status == 1);
        CHECK(text.find("BMI_ETIMEDOUT (Connection timed out)") != std::string::npos);
        CHECK(text.find("hint: no answer from " + addr + " within one of libbmi's own deadlines") !=
              std::string::npos);
        CHECK(text.find("20000 ms") == std::string::npos);
    }
    SECTION("a setting that is not valid") {
        auto [status, text] =
            run_client_for_messages({"env", "BMI_TCP_SETUP_TIMEOUT_MS=soon", client_exe,
                                     "--iterations", "1", "tcp://127.0.0.1:1"});
        INFO(text);
        CHECK(status == 1);
        CHECK(text.find("BMI_TCP_SETUP_TIMEOUT_MS") != std::string::npos);
        CHECK(text.find("a warning above names a setting that is not valid") != std::string::npos);
    }
}

TEST_CASE("the C++ hello client says what, where, why, and what to check", "[integration]") {
    const std::string exe = program_from_env("BMI_HELLO");
    std::string addr;
    ::close(bound_loopback_socket(addr));  // nothing listens there now
    auto [status, text] = run_client_for_messages({exe, "client", addr, "1"});
    INFO(text);
    CHECK(status == 1);
    CHECK(text.find("hello: sending a greeting to " + addr +
                    " failed: BMI_ECONNREFUSED (Connection refused)") != std::string::npos);
    CHECK(text.find("hello: hint: is a server running at " + addr) != std::string::npos);
    const std::string enabled = program_from_env("BMI_ENABLED_METHODS");
    if (enabled.find("shm") == std::string::npos) return;
    // The method comes from the address: shm works without naming it anywhere.
    Process server = Process::spawn({exe, "server", "shm://hello-" + std::to_string(getpid())});
    auto shm_addr = server.read_address(10s);
    REQUIRE(shm_addr);
    auto [shm_status, shm_text] = run_client_for_messages({exe, "client", *shm_addr, "5"});
    INFO(shm_text);
    CHECK(shm_status == 0);
    CHECK(shm_text == "OK 5 greetings answered\n");
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    CHECK(*server_status == 0);
}
