// SPDX-License-Identifier: LGPL-2.1-or-later
// The pool of freed shared buffers (OwnRegions in shm_region.hpp): memalloc/send/memfree
// cycles of OrangeFS's sizes between two processes reuse a few memfds and never deliver
// stale bytes, and the pool keeps no more than its limits.
// The memfds are counted from outside: /proc/self/maps and /proc/self/fd name each one
// "memfd:bmi-shm-buffer", and a new memfd is a new inode.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

constexpr const char* buffer_name = "/memfd:bmi-shm-buffer";

// Adds the inode of every shared-buffer memfd this process maps (its own and its peers').
void note_mapped_buffers(std::set<unsigned long>& seen) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find(buffer_name) == std::string::npos) continue;
        std::istringstream fields(line);
        std::string range, perms, offset, device;
        unsigned long inode = 0;
        fields >> range >> perms >> offset >> device >> inode;
        seen.insert(inode);
    }
}

// The memfds this process holds descriptors of, by inode: its own regions, live or pooled
// (a peer's offer is closed once mapped).
std::set<unsigned long> own_buffer_memfds() {
    std::set<unsigned long> inodes;
    DIR* dir = opendir("/proc/self/fd");
    REQUIRE(dir != nullptr);
    while (dirent* entry = readdir(dir)) {
        std::string path = std::string("/proc/self/fd/") + entry->d_name;
        char target[256] = {};
        struct stat st {};
        if (readlink(path.c_str(), target, sizeof target - 1) > 0 &&
            std::strncmp(target, buffer_name, std::strlen(buffer_name)) == 0 &&
            stat(path.c_str(), &st) == 0)
            inodes.insert(st.st_ino);
    }
    closedir(dir);
    return inodes;
}

constexpr int rounds = 200;

// OrangeFS's request and response buffers: 18-57 KB, every round another size.
std::size_t round_size(int round) { return 18000 + static_cast<std::size_t>(round) * 7919 % 39000; }

// Waits for id without Catch (a forked child must not throw into Catch): its error, or -1
// past the deadline.
int finish_quietly(Side& side, int posted, bmi_op_id_t id) {
    if (posted != 0) return posted == 1 ? 0 : posted;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        int outcount = 0;
        core::Completion done;
        if (side.instance->test(id, side.context, 50, outcount, done) != 0) return -2;
        if (outcount == 1) return done.error;
    }
    return -1;
}

// One side of `rounds` round trips, each through buffers from BMI_memalloc freed right
// after: the client sends first, the server echoes another pattern back. Returns 0, or the
// round's number plus 1 (as a report byte, capped) where something went wrong.
int run_rounds(Side& side, BMI_addr_t peer, bool client, std::set<unsigned long>& seen) {
    for (int round = 0; round < rounds; ++round) {
        std::size_t size = round_size(round);
        auto length = static_cast<bmi_size_t>(size);
        auto tag = static_cast<bmi_msg_tag_t>(round);
        for (int leg = 0; leg < 2; ++leg) {
            bool sending = (leg == 0) == client;
            auto seed = static_cast<std::uint32_t>(round * 2 + leg);
            auto* buffer = static_cast<char*>(side.instance->memalloc(peer, length));
            if (buffer == nullptr) return std::min(round + 1, 255);
            // The OrangeFS dialect zeroes every BMI_memalloc, pooled memory too.
            bool zeroed = std::all_of(buffer, buffer + size, [](char c) { return c == 0; });
            bmi_op_id_t id = 0;
            int posted = 0;
            if (sending) {
                fill_pattern(buffer, size, seed);
                posted =
                    side.instance->post(send_request(side, peer, buffer, length, tag), id, nullptr);
            } else {
                posted =
                    side.instance->post(recv_request(side, peer, buffer, length, tag), id, nullptr);
            }
            bool ok = zeroed && finish_quietly(side, posted, id) == 0 &&
                      (sending || check_pattern(buffer, size, seed));
            note_mapped_buffers(seen);
            side.instance->memfree(peer, buffer);
            if (!ok) return std::min(round + 1, 255);
        }
    }
    return 0;
}

}  // namespace

TEST_CASE("shm: memalloc/send/memfree of 18-57 KB between two processes reuses a few memfds",
          "[shm][pool]") {
    std::string listen = test_listen_address("shm");
    Side server;
    core::InitParams params;
    params.listen = listen;
    params.flags = BMI_INIT_SERVER;
    REQUIRE(core::Instance::create(params, server.instance) == 0);
    REQUIRE(server.instance->open_context(server.context) == 0);
    // The child is the client; it reports how its rounds went, then how many memfds it saw.
    auto child = client_child(listen, [](int to_parent, Side& me, BMI_addr_t server_addr) {
        std::set<unsigned long> seen;
        report(to_parent, static_cast<unsigned char>(run_rounds(me, server_addr, true, seen)));
        report(to_parent, static_cast<unsigned char>(std::min<std::size_t>(seen.size(), 255)));
        return 0;
    });
    core::UnexpectedMessage hello = wait_unexpected(server);
    server.instance->unexpected_free(hello.buffer);
    std::set<unsigned long> seen;
    CHECK(run_rounds(server, hello.addr, false, seen) == 0);
    CHECK(child.wait_report(30000) == 0);
    int child_saw = child.wait_report();
    // Each side has at most two buffers of each of two classes (32 and 64 KiB) alive at once,
    // and maps as many of the peer's; without the pool every round makes two new ones.
    INFO("memfds the server mapped: " << seen.size() << ", the client: " << child_saw);
    CHECK(!seen.empty());
    CHECK(seen.size() <= 8);
    CHECK(child_saw > 0);
    CHECK(child_saw <= 8);
}

TEST_CASE("shm: the pool of freed shared buffers keeps to its byte cap and per-class count",
          "[shm][pool]") {
    struct Case {
        const char* options;
        int kept;  // of ten 40 KB buffers (64 KiB class) and ten 100 KB ones (128 KiB)
    };
    auto limits = GENERATE(Case{"", 20}, Case{"shm_pool_bytes=320K", 5},
                           Case{"shm_pool_per_class=3", 6}, Case{"shm_pool_bytes=0", 0},
                           Case{"shm_pool_per_class=0", 0});
    INFO("options: " << limits.options);
    Pair pair = make_peers("shm", limits.options);
    Side& client = pair.client;
    auto allocate_twenty = [&](std::vector<void*>& buffers) {
        buffers.clear();
        for (int i = 0; i < 20; ++i)
            buffers.push_back(client.instance->memalloc(pair.server_addr, i < 10 ? 40000 : 100000));
        REQUIRE(std::count(buffers.begin(), buffers.end(), nullptr) == 0);
    };
    auto free_all = [&](const std::vector<void*>& buffers) {
        for (void* buffer : buffers)
            REQUIRE(client.instance->memfree(pair.server_addr, buffer) == 0);
    };
    const std::set<unsigned long> before = own_buffer_memfds();
    REQUIRE(before.empty());
    std::vector<void*> buffers;
    allocate_twenty(buffers);
    REQUIRE(own_buffer_memfds().size() == 20);
    free_all(buffers);
    const std::set<unsigned long> pooled = own_buffer_memfds();
    CHECK(pooled.size() == static_cast<std::size_t>(limits.kept));
    // A pooled buffer is not the application's: freeing it again is refused.
    CHECK(client.instance->memfree(pair.server_addr, buffers.back()) == -BMI_EINVAL);
    // Allocations take every pooled buffer first: only the rest are new memfds.
    allocate_twenty(buffers);
    const std::set<unsigned long> in_use = own_buffer_memfds();
    CHECK(in_use.size() == 20);
    CHECK(std::includes(in_use.begin(), in_use.end(), pooled.begin(), pooled.end()));
    free_all(buffers);
}
