// SPDX-License-Identifier: LGPL-2.1-or-later
// Encrypted ofi traffic (doc/security.md, "ofi"), over the provider the run selects: messages
// of every kind arrive intact through numbered records and sealed large-message data, across
// many key steps; the bytes the provider carries never show a known pattern, and show it with
// encryption off (so the check can fail): over ofi+tcp what crosses the loopback interface,
// read from a packet socket; over ofi+shm the provider's regions in /dev/shm. require refuses a
// peer that cannot encrypt, and prefer falls back to plain traffic with one.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../unit/key_files.hpp"
#include "harness.hpp"
#include "methods/method_config.hpp"
#include "round_trip.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_method.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

bool ofi_compiled() {
    const auto schemes = compiled_schemes();
    return std::find(schemes.begin(), schemes.end(), "ofi") != schemes.end();
}

std::string provider() {
    const char* p = std::getenv("BMI_CONFORMANCE_OFI_PROVIDER");
    return p != nullptr && *p != '\0' ? p : "tcp";
}

method::ofi::Stats stats_of(Side& side) {
    method::ofi::Stats stats;
    REQUIRE(side.instance->get_info(0, method::ofi::get_stats_option, &stats) == 0);
    return stats;
}

// Unique to this process, so another test's traffic cannot show it.
std::string known_pattern() { return "KNOWN-OFI-PATTERN-" + std::to_string(getpid()) + "-"; }

std::vector<char> patterned(std::size_t size) {
    const std::string pattern = known_pattern();
    std::vector<char> out(size);
    for (std::size_t i = 0; i < size; ++i) out[i] = pattern[i % pattern.size()];
    return out;
}

bool shows_pattern(const std::vector<char>& bytes) {
    const std::string pattern = known_pattern();
    return std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end()) != bytes.end();
}

// Unexpected, small, near the eager limit (above rxm's own eager size), large (a
// rendezvous in chunks) and a large list.
void every_kind(Pair& pair, BMI_addr_t client, const std::vector<char>* payload = nullptr) {
    std::vector<char> note(200);
    if (payload != nullptr)
        std::copy(payload->begin(), payload->begin() + 200, note.begin());
    else
        fill_pattern(note.data(), note.size(), 99);
    core::PostRequest unexpected = send_request(pair.client, pair.server_addr, note.data(), 200, 9);
    unexpected.kind = method::OpKind::send_unexpected;
    {
        Pump receiver(*pair.server.instance);
        REQUIRE(post_and_wait(pair.client, unexpected, 30000).error == 0);
    }
    const core::UnexpectedMessage got = wait_unexpected(pair.server, 30000);
    REQUIRE(got.error == 0);
    REQUIRE(got.size == 200);
    CHECK(std::memcmp(got.buffer, note.data(), 200) == 0);
    pair.server.instance->unexpected_free(got.buffer);

    const bmi_size_t sizes[] = {1, 100, 60 * 1024, 3 * 1024 * 1024 + 17};
    std::uint32_t seed = 1;
    for (bmi_size_t size : sizes) {
        round_trip(pair, client, size, 1, seed, payload, 30000);
        seed += 2;
    }
    round_trip(pair, client, 2 * 1024 * 1024 + 5, 3, seed);
}

// Every frame that crosses the loopback interface while it runs, from a packet socket (needs
// CAP_NET_RAW; usable() says whether it could be opened).
class LoopbackRecorder {
public:
    LoopbackRecorder() {
        fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
        if (fd_ < 0) return;
        sockaddr_ll at{};
        at.sll_family = AF_PACKET;
        at.sll_protocol = htons(ETH_P_ALL);
        at.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
        if (at.sll_ifindex == 0 || bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
            close(fd_);
            fd_ = -1;
            return;
        }
        thread_ = std::thread([this] { record(); });
    }
    ~LoopbackRecorder() { stop(); }
    LoopbackRecorder(const LoopbackRecorder&) = delete;
    LoopbackRecorder& operator=(const LoopbackRecorder&) = delete;

    bool usable() const { return fd_ >= 0; }
    std::vector<char> stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    void record() {
        std::vector<char> frame(1 << 17);
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 20) <= 0) continue;
            const ssize_t n = recv(fd_, frame.data(), frame.size(), MSG_DONTWAIT);
            if (n <= 0) continue;
            std::lock_guard lock(mutex_);
            seen_.insert(seen_.end(), frame.begin(), frame.begin() + n);
        }
    }
    int fd_ = -1;
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<char> seen_;
    std::thread thread_;
};

// The bytes of this process's ofi+shm regions, the servers' (conf-ofi-PID-N, the harness's
// listen names) and the clients' (bmi-PID-N), as the provider left them.
std::vector<char> shm_regions() {
    std::vector<char> all;
    const std::string pid = std::to_string(getpid()) + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("conf-ofi-" + pid, 0) != 0 && name.rfind("bmi-" + pid, 0) != 0) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
}

// Sends the pattern both ways in messages of every kind under `options` and returns what the
// provider carried (empty: nothing could be watched here).
std::vector<char> carried(const std::string& options, bool& watched) {
    const std::vector<char> payload = patterned(3 * 1024 * 1024 + 17);
    Pair pair = make_peers("ofi", options);
    const BMI_addr_t client = introduce(pair);
    if (provider() == "shm") {
        every_kind(pair, client, &payload);
        watched = true;
        return shm_regions();
    }
    if (provider() != "tcp") {
        // verbs: the traffic crosses an RDMA device, not an interface a packet socket reads.
        watched = false;
        every_kind(pair, client, &payload);
        return {};
    }
    LoopbackRecorder recorder;
    watched = recorder.usable();
    if (!watched) return {};
    every_kind(pair, client, &payload);
    return recorder.stop();
}

}  // namespace

TEST_CASE("ofi: encrypted messages of every kind arrive intact", "[conformance][ofi][encryption]") {
    if (!ofi_compiled()) return;
    KeyFiles files;
    const std::string key = files.key("fs.key", 0x5a);
    SECTION("require") {
        Pair pair = make_peers("ofi", "key_file=" + key + ",encryption=require");
        const BMI_addr_t client = introduce(pair);
        every_kind(pair, client);
        CHECK(stats_of(pair.server).encrypted_peers == 1);
        CHECK(stats_of(pair.client).encrypted_peers == 1);
        CHECK(stats_of(pair.server).records_failed == 0);
    }
    SECTION("a new key every 3 records: many steps, each side at its own pace") {
        Pair pair =
            make_peers("ofi", "key_file=" + key + ",encryption=prefer,encryption_rekey_records=3");
        const BMI_addr_t client = introduce(pair);
        for (int i = 0; i < 3; ++i) every_kind(pair, client);
        CHECK(stats_of(pair.server).encrypted_peers == 1);
        CHECK(stats_of(pair.client).records_failed == 0);
    }
}

TEST_CASE("ofi: the provider carries no readable pattern with encryption, and does without",
          "[conformance][ofi][encryption]") {
    if (!ofi_compiled()) return;
    KeyFiles files;
    const std::string key = files.key("fs.key", 0x5b);
    bool watched = false;
    const std::vector<char> plain = carried("key_file=" + key, watched);
    if (!watched) {
        WARN("the wire is not watched here (ofi+tcp needs CAP_NET_RAW for a packet socket on lo; "
             "ofi+verbs has no interface to read)");
        return;
    }
    REQUIRE_FALSE(plain.empty());
    CHECK(shows_pattern(plain));
    const std::vector<char> sealed = carried("key_file=" + key + ",encryption=require", watched);
    REQUIRE_FALSE(sealed.empty());
    CHECK_FALSE(shows_pattern(sealed));
}

TEST_CASE("ofi: require refuses a peer that cannot encrypt; prefer talks plainly with it",
          "[conformance][ofi][encryption]") {
    if (!ofi_compiled()) return;
    KeyFiles files;
    const std::string key = "key_file=" + files.key("fs.key", 0x5c);
    SECTION("the server requires, the client's encryption is off") {
        Pair pair = make_peers("ofi", key + ",encryption=require", key);
        const char byte = 'x';
        Pump server(*pair.server.instance);
        const auto sent = post_and_wait(
            pair.client, send_request(pair.client, pair.server_addr, &byte, 1, 1), 10000);
        CHECK(sent.error == -BMI_EACCES);
        CHECK(stats_of(pair.server).encrypted_peers == 0);
    }
    SECTION("the client requires, the server's encryption is off") {
        Pair pair = make_peers("ofi", key, key + ",encryption=require");
        const char byte = 'x';
        Pump server(*pair.server.instance);
        const auto sent = post_and_wait(
            pair.client, send_request(pair.client, pair.server_addr, &byte, 1, 1), 10000);
        CHECK(sent.error == -BMI_EACCES);
    }
    SECTION("the server prefers, the client's encryption is off") {
        Pair pair = make_peers("ofi", key + ",encryption=prefer", key);
        const BMI_addr_t client = introduce(pair);
        round_trip(pair, client, 100, 1, 7);
        CHECK(stats_of(pair.server).encrypted_peers == 0);
        CHECK(stats_of(pair.client).encrypted_peers == 0);
    }
}

#endif
