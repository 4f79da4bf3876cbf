// SPDX-License-Identifier: LGPL-2.1-or-later
// examples/pvfs_server against hostile peers made of raw sockets speaking the legacy (OrangeFS)
// framing: after each round of attacks, legitimate clients are served byte for byte (pvfs_client
// checks every response), and the server's memory and descriptors come back to where they were
// (issue 13: what a departed peer leaves behind is released; nothing a peer sends grows the
// server for good).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "process_harness.hpp"

using namespace std::chrono_literals;
using bmi::integration::Process;
using bmi::integration::program_from_env;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized_build = true;
#else
constexpr bool sanitized_build = false;
#endif

constexpr std::uint32_t legacy_magic = 51903;
enum : std::uint32_t { mode_unexpected = 2, mode_eager = 4, mode_rendezvous = 8 };

void put_le(std::uint8_t* p, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::vector<std::uint8_t> header(std::uint32_t magic, std::uint32_t mode, std::int32_t tag,
                                 std::uint64_t size) {
    std::vector<std::uint8_t> h(24);
    put_le(h.data(), magic, 4);
    put_le(h.data() + 4, mode, 4);
    put_le(h.data() + 8, static_cast<std::uint64_t>(static_cast<std::int64_t>(tag)), 8);
    put_le(h.data() + 16, size, 8);
    return h;
}

std::uint16_t port_of(const std::string& address) {
    return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// Connects, writes bytes (as much as the socket takes without blocking for long), closes.
void hit(std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
        timeval limit{0, 200000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        std::size_t done = 0;
        while (done < bytes.size()) {
            ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
            if (n <= 0) break;
            done += static_cast<std::size_t>(n);
        }
    }
    close(fd);
}

// One round: every kind of abuse the legacy framing allows from a stranger, each on its own
// connection that then goes away.
void attack(std::uint16_t port) {
    // Early eager data for a tag nobody receives: 64 x 16 KiB per connection.
    std::vector<std::uint8_t> early;
    for (int i = 0; i < 64; ++i) {
        auto h = header(legacy_magic, mode_eager, 77, 16384);
        early.insert(early.end(), h.begin(), h.end());
        early.resize(early.size() + 16384, static_cast<std::uint8_t>(i));
    }
    // An unexpected request that announces 16 KiB and stops after 10 bytes.
    auto trickle = header(legacy_magic, mode_unexpected, 1, 16384);
    trickle.resize(trickle.size() + 10, 0x55);
    // A legacy rendezvous header with no receive posted, which parks the connection.
    auto parked = header(legacy_magic, mode_rendezvous, 78, 1 << 20);
    // Junk and an oversized unexpected header.
    std::vector<std::uint8_t> junk(24, 0x11);
    auto oversized = header(legacy_magic, mode_unexpected, 1, 1ull << 40);
    for (int i = 0; i < 40; ++i) {
        hit(port, early);
        hit(port, trickle);
        hit(port, parked);
        hit(port, junk);
        hit(port, oversized);
    }
}

long status_field(pid_t pid, const std::string& field) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    return -1;
}

long descriptors(pid_t pid) {
    long n = 0;
    for ([[maybe_unused]] auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        ++n;
    return n;
}

void serve_clients(const std::string& client_exe, const std::string& addr) {
    std::vector<Process> clients;
    for (const char* size : {"100", "16384", "262144"})
        clients.push_back(Process::spawn(
            {client_exe, "--iterations", "100", "--size", size, "--timeout-ms", "30000", addr}));
    for (auto& client : clients) {
        auto status = client.wait(60s);
        REQUIRE(status);
        CHECK(*status == 0);
        CHECK(client.unread_output().rfind("OK 100/100 requests", 0) == 0);
    }
}

}  // namespace

TEST_CASE("pvfs_server serves its clients through rounds of attacks and stays flat",
          "[integration][hostile]") {
    const std::string server_exe = program_from_env("BMI_PVFS_SERVER");
    const std::string client_exe = program_from_env("BMI_PVFS_CLIENT");
    Process server = Process::spawn({server_exe, "tcp://127.0.0.1:0"});
    auto addr = server.read_address(10s);
    REQUIRE(addr);
    const std::uint16_t port = port_of(*addr);

    serve_clients(client_exe, *addr);  // warm-up: the server's steady state
    const long rss_before = status_field(server.pid(), "VmRSS");
    const long fds_before = descriptors(server.pid());
    REQUIRE(rss_before > 0);

    long rss_after = 0, fds_after = 0;
    for (int round = 0; round < 3; ++round) {
        attack(port);
        serve_clients(client_exe, *addr);
        // Descriptors come back once the server has seen every attacker's close.
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        do {
            fds_after = descriptors(server.pid());
            if (fds_after <= fds_before) break;
            std::this_thread::sleep_for(50ms);  // polling another process's /proc, not syncing
        } while (std::chrono::steady_clock::now() < deadline);
        rss_after = status_field(server.pid(), "VmRSS");
        INFO("round " << round << ": RSS " << rss_before << " -> " << rss_after
                      << " kB, descriptors " << fds_before << " -> " << fds_after);
        CHECK(fds_after <= fds_before);
        // Within 10 %, with 1 MiB of slack for a small server's allocator arenas. A sanitizer's
        // allocator keeps freed memory in quarantine on purpose, so only plain builds judge it.
        if (!sanitized_build) CHECK(rss_after <= rss_before + rss_before / 10 + 1024);
    }
    WARN("pvfs_server RSS " << rss_before << " kB before, " << rss_after
                            << " kB after three rounds; descriptors " << fds_before << " -> "
                            << fds_after);

    Process stopper = Process::spawn({client_exe, "--iterations", "1", "--shutdown", *addr});
    REQUIRE(stopper.wait(30s));
    auto status = server.wait(20s);
    REQUIRE(status);
    CHECK(*status == 0);
}
