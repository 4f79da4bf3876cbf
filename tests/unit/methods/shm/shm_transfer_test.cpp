// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method between two or more instances of one process: both large-message paths,
// a 64 MiB message, many clients on one listener, and what a connection leaves behind.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "shm_stats.hpp"

using namespace bmi;
using namespace bmi::test;
using bmi::method::shm::TakenPath;

namespace {
// Sets an environment variable for the scope of one test; instances read it when created.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
    ~ScopedEnv() { unsetenv(name_); }

private:
    const char* name_;
};

std::set<std::string> directory(const char* path) {
    std::set<std::string> names;
    if (DIR* d = opendir(path)) {
        while (dirent* e = readdir(d)) names.insert(e->d_name);
        closedir(d);
    }
    return names;
}

// Two shm instances that progress on their own threads, introduced to each other.
struct PumpedPair {
    Pair pair = make_peers("shm");
    Pump server_pump{*pair.server.instance};
    Pump client_pump{*pair.client.instance};
    BMI_addr_t client_addr = introduce(pair);
};

// One large message client -> server, receive posted first, sent as a 3-piece list and
// received into `pieces` segments of uneven length (1: a contiguous buffer); it must have
// come over path.
void exchange_large(TakenPath path, std::size_t size, std::uint32_t seed, int pieces = 1) {
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    std::vector<char> out(size), in(size + 64, 'x');
    fill_pattern(out.data(), size, seed);
    bmi_op_id_t rid = 0;
    auto recv = recv_request(pair.server, client_addr, in.data(), static_cast<bmi_size_t>(size), 8);
    std::vector<void*> targets;
    std::vector<bmi_size_t> target_sizes;
    for (int i = 0; i < pieces && pieces > 1; ++i) {
        // 1, 3, 5 ... parts of an arithmetic split: no two pieces alike, none aligned.
        std::size_t begin = size * static_cast<std::size_t>(i * i) /
                            static_cast<std::size_t>(pieces * pieces);
        std::size_t end = size * static_cast<std::size_t>((i + 1) * (i + 1)) /
                          static_cast<std::size_t>(pieces * pieces);
        targets.push_back(in.data() + begin);
        target_sizes.push_back(static_cast<bmi_size_t>(end - begin));
    }
    if (pieces > 1) {
        recv.buffer = nullptr;
        recv.list = targets.data();
        recv.sizes = target_sizes.data();
        recv.list_count = pieces;
    }
    REQUIRE(pair.server.instance->post(recv, rid, nullptr) == 0);
    const void* list[3] = {out.data(), out.data() + size / 3, out.data() + size / 2};
    bmi_size_t sizes[3] = {static_cast<bmi_size_t>(size / 3),
                           static_cast<bmi_size_t>(size / 2 - size / 3),
                           static_cast<bmi_size_t>(size - size / 2)};
    auto send =
        send_request(pair.client, pair.server_addr, nullptr, static_cast<bmi_size_t>(size), 8);
    send.list = list;
    send.sizes = sizes;
    send.list_count = 3;
    REQUIRE(post_and_wait(pair.client, send, 30000).error == 0);
    auto got = wait_op(pair.server, rid, 30000);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == static_cast<bmi_size_t>(size));
    REQUIRE(check_pattern(in.data(), size, seed));
    REQUIRE(in[size] == 'x');
    INFO("path " << method::shm::taken_path_name(path));
    REQUIRE(large_receives(pair.server, size, path) == 1u);
}

// Posts the server's receive of size bytes, then the client's send of them, both with tag.
void post_receive_then_send(Pair& pair, BMI_addr_t client_addr, void* in, const void* out,
                            std::size_t size, bmi_msg_tag_t tag, bmi_op_id_t& rid,
                            bmi_op_id_t& sid) {
    auto length = static_cast<bmi_size_t>(size);
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in, length, tag), rid,
                                       nullptr) == 0);
    REQUIRE(pair.client.instance->post(
                send_request(pair.client, pair.server_addr, out, length, tag), sid, nullptr) == 0);
}
}  // namespace

// BMI_SHM_SPLIT_COPY=1: every message above the eager limit is copied by both processes.
TEST_CASE("shm: large messages by split copy, contiguous or lists on both sides", "[shm]") {
    ScopedEnv split("BMI_SHM_SPLIT_COPY", "1");
    auto size = GENERATE(std::size_t{16385}, std::size_t{100000}, std::size_t{(1 << 20) + 3},
                         std::size_t{(8 << 20) + 5});
    auto pieces = GENERATE(1, 5);
    exchange_large(TakenPath::split, size,
                   static_cast<std::uint32_t>(size) + static_cast<std::uint32_t>(pieces), pieces);
}

// BMI_SHM_SPLIT_COPY=0 keeps the sender out: the receiver reads alone from the single-copy
// minimum (0 here: every large message) ...
TEST_CASE("shm: large messages by a single copy the receiver makes alone", "[shm]") {
    ScopedEnv alone("BMI_SHM_SPLIT_COPY", "0");
    ScopedEnv all_single("BMI_SHM_SINGLE_COPY_MIN", "0");
    exchange_large(TakenPath::single, 8 << 20, 1);
}

// ... and below it the message is pipelined through the ring.
TEST_CASE("shm: large messages by two copies below the single-copy minimum", "[shm]") {
    ScopedEnv alone("BMI_SHM_SPLIT_COPY", "0");
    exchange_large(TakenPath::stream, 1 << 20, 5);
}

TEST_CASE("shm: large messages by the two-copy fallback", "[shm]") {
    ScopedEnv force("BMI_SHM_SINGLE_COPY", "0");
    exchange_large(TakenPath::stream, 8 << 20, 2);
}

TEST_CASE("shm: a 64 MiB message arrives intact on every path", "[shm]") {
    SECTION("split copy") {
        ScopedEnv split("BMI_SHM_SPLIT_COPY", "1");
        exchange_large(TakenPath::split, 64 << 20, 3);
    }
    SECTION("single copy by the receiver") {
        ScopedEnv alone("BMI_SHM_SPLIT_COPY", "0");
        exchange_large(TakenPath::single, 64 << 20, 6);  // above the default single-copy minimum
    }
    SECTION("two copies") {
        ScopedEnv force("BMI_SHM_SINGLE_COPY", "0");
        exchange_large(TakenPath::stream, 64 << 20, 4);
    }
}

// By default (BMI_SHM_SPLIT_COPY=auto) the receiver times both large-message paths on the
// first messages of a size (three split copies, then three streams; shm_path_choice.hpp) and
// then mostly takes the faster: a run of one size crosses both paths and the switches
// between them, and every message must still arrive whole.
TEST_CASE("shm: a run of large messages arrives intact while the receiver picks its paths",
          "[shm]") {
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    constexpr std::size_t size = (1 << 20) + 7;
    std::vector<char> out(size), in(size + 64, 'x');
    for (std::uint32_t round = 0; round < 24; ++round) {
        fill_pattern(out.data(), size, 500 + round);
        bmi_op_id_t rid = 0, sid = 0;
        post_receive_then_send(pair, client_addr, in.data(), out.data(), size, 30, rid, sid);
        auto got = wait_op(pair.server, rid, 30000);
        REQUIRE(got.error == 0);
        REQUIRE(got.actual_size == static_cast<bmi_size_t>(size));
        REQUIRE(check_pattern(in.data(), size, 500 + round));
        REQUIRE(in[size] == 'x');
        REQUIRE(wait_op(pair.client, sid, 30000).error == 0);
    }
}

TEST_CASE("shm: a new size takes the path its neighbour found faster, short runs no other",
          "[shm]") {
    // The receiver times both paths in the first size class only; a short run of the next size
    // (26 messages: bmi-perf's 16 timed rounds of its larger sizes and 10 of warm-up) takes
    // the path that class prefers for every message, since a first try of the other path into
    // buffers it never touched runs cold (PathChoice::explore_leaned).
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    constexpr std::size_t first = std::size_t{1} << 20, next = std::size_t{2} << 20;
    std::vector<char> out(next), in(next + 64, 'x');
    std::uint32_t seed = 700;
    auto run = [&](std::size_t size, int count) {
        for (int i = 0; i < count; ++i, ++seed) {
            fill_pattern(out.data(), size, seed);
            bmi_op_id_t rid = 0, sid = 0;
            post_receive_then_send(pair, pumped.client_addr, in.data(), out.data(), size, 31, rid,
                                   sid);
            REQUIRE(wait_op(pair.server, rid, 30000).error == 0);
            REQUIRE(check_pattern(in.data(), size, seed));
            REQUIRE(wait_op(pair.client, sid, 30000).error == 0);
        }
    };
    auto by_path = [&](std::size_t size) {
        const auto split = large_receives(pair.server, size, TakenPath::split);
        const auto single = large_receives(pair.server, size, TakenPath::single);
        const auto stream = large_receives(pair.server, size, TakenPath::stream);
        REQUIRE(split);
        REQUIRE(single);
        REQUIRE(stream);
        return std::pair{*split + *single, *stream};
    };
    run(first, 16);
    const auto [first_split, first_stream] = by_path(first);
    INFO("first size: split " << first_split << ", stream " << first_stream);
    CHECK(first_split + first_stream == 16u);
    CHECK(first_split >= 3u);  // both paths timed
    CHECK(first_stream >= 3u);
    run(next, 26);
    const auto [next_split, next_stream] = by_path(next);
    INFO("next size: split " << next_split << ", stream " << next_stream);
    CHECK(next_split + next_stream == 26u);
    CHECK((next_split == 0u || next_stream == 0u));
}

namespace {
// BMI_memalloc memory of one side, freed with the scope.
class SharedBuffer {
public:
    SharedBuffer(Side& side, BMI_addr_t peer, std::size_t size)
        : side_(side),
          peer_(peer),
          data_(static_cast<char*>(side.instance->memalloc(peer, static_cast<bmi_size_t>(size)))) {
        REQUIRE(data_ != nullptr);
    }
    ~SharedBuffer() { side_.instance->memfree(peer_, data_); }
    SharedBuffer(const SharedBuffer&) = delete;
    SharedBuffer& operator=(const SharedBuffer&) = delete;
    char* data() const { return data_; }

private:
    Side& side_;
    BMI_addr_t peer_;
    char* data_;
};

// One message client -> server, each side's buffer from BMI_memalloc or a plain vector,
// received as `pieces` uneven segments; checks every byte and nothing beyond.
void exchange_from(Pair& pair, BMI_addr_t client_addr, char* out, char* in, std::size_t size,
                   std::uint32_t seed, int pieces) {
    fill_pattern(out, size, seed);
    std::memset(in, 'x', size + 64);
    std::vector<void*> targets;
    std::vector<bmi_size_t> target_sizes;
    for (int i = 0; i < pieces; ++i) {
        std::size_t begin = size * static_cast<std::size_t>(i) / static_cast<std::size_t>(pieces);
        std::size_t end = size * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(pieces);
        targets.push_back(in + begin);
        target_sizes.push_back(static_cast<bmi_size_t>(end - begin));
    }
    auto recv = recv_request(pair.server, client_addr, in, static_cast<bmi_size_t>(size), 12);
    if (pieces > 1) {
        recv.buffer = nullptr;
        recv.list = targets.data();
        recv.sizes = target_sizes.data();
        recv.list_count = pieces;
    }
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv, rid, nullptr) == 0);
    auto send = send_request(pair.client, pair.server_addr, out, static_cast<bmi_size_t>(size), 12);
    REQUIRE(post_and_wait(pair.client, send, 30000).error == 0);
    auto got = wait_op(pair.server, rid, 30000);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == static_cast<bmi_size_t>(size));
    REQUIRE(check_pattern(in, size, seed));
    REQUIRE(in[size] == 'x');
}

// Large receives of size copied from the sender's shared buffer, by both processes or (split
// copy off, or the sender waiting on our CPU, as the pump thread may) by the receiver alone.
std::uint64_t from_shared(Side& side, std::size_t size) {
    const auto both = large_receives(side, size, TakenPath::shared);
    const auto alone = large_receives(side, size, TakenPath::shared_single);
    REQUIRE(both);
    REQUIRE(alone);
    return *both + *alone;
}

// A pumped pair with a shared buffer on each side: the client's to send from, the server's
// (64 bytes longer, to catch an overrun) to receive into.
struct SharedPair {
    explicit SharedPair(std::size_t size)
        : out(pumped.pair.client, pumped.pair.server_addr, size),
          in(pumped.pair.server, pumped.client_addr, size + 64),
          size(size) {}
    // One message from out into target (in, or a plain buffer), in pieces.
    void exchange(char* target, std::uint32_t seed, int pieces) {
        exchange_from(pumped.pair, pumped.client_addr, out.data(), target, size, seed, pieces);
    }
    PumpedPair pumped;
    SharedBuffer out, in;
    std::size_t size;
};
}  // namespace

// BMI_memalloc memory is shared with the peer (shm_region.hpp): a message in it is copied
// with memcpy by both processes, whichever of the two buffers is shared.
TEST_CASE("shm: large messages between BMI_memalloc buffers, either or both shared", "[shm]") {
    auto size =
        GENERATE(std::size_t{16385}, std::size_t{(1 << 20) + 3}, std::size_t{(8 << 20) + 5});
    auto pieces = GENERATE(1, 3);
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    SharedBuffer out(pair.client, pair.server_addr, size);
    SharedBuffer in(pair.server, client_addr, size + 64);
    std::vector<char> plain_out(size), plain_in(size + 64);
    auto seed = static_cast<std::uint32_t>(size) + static_cast<std::uint32_t>(pieces);
    SECTION("both shared") {
        exchange_from(pair, client_addr, out.data(), in.data(), size, seed, pieces);
        REQUIRE(from_shared(pair.server, size) == 1u);
    }
    SECTION("sender's shared") {
        exchange_from(pair, client_addr, out.data(), plain_in.data(), size, seed, pieces);
        REQUIRE(from_shared(pair.server, size) == 1u);
    }
    SECTION("receiver's shared") {
        exchange_from(pair, client_addr, plain_out.data(), in.data(), size, seed, pieces);
    }
}

// A shared buffer needs no cross-memory attach: with it refused (forced off here), messages
// in shared memory still take one copy, and the rest two.
TEST_CASE("shm: shared buffers carry large messages without cross-memory attach", "[shm]") {
    ScopedEnv force("BMI_SHM_SINGLE_COPY", "0");
    constexpr std::size_t size = (4 << 20) + 1;
    SharedPair shared(size);
    std::vector<char> plain_in(size + 64);
    shared.exchange(shared.in.data(), 61, 1);
    shared.exchange(plain_in.data(), 62, 2);
    REQUIRE(from_shared(shared.pumped.pair.server, size) == 2u);
}

// With split copy off (BMI_SHM_SPLIT_COPY=0) the receiver copies a shared buffer alone, asking
// the sender for nothing (shared-single). Split copy on, who copies depends on where the
// threads run: shm_shared_cpu_test.cpp pins them and checks both ways.
TEST_CASE("shm: the receiver copies a shared buffer alone when split copy is off", "[shm]") {
    ScopedEnv alone("BMI_SHM_SPLIT_COPY", "0");
    constexpr std::size_t size = (2 << 20) + 9;
    SharedPair shared(size);
    constexpr std::uint64_t rounds = 6;
    for (std::uint32_t round = 0; round < rounds; ++round)
        shared.exchange(shared.in.data(), 1200 + round, 1 + static_cast<int>(round % 2));
    Side& server = shared.pumped.pair.server;
    REQUIRE(large_receives(server, size, TakenPath::shared_single) == rounds);
    REQUIRE(from_shared(server, size) == rounds);
}

// Copying alone names none of our buffer's pieces to the sender, so a receive of more pieces
// than one HELP record could list still copies the shared buffer without the kernel.
TEST_CASE("shm: a receive of thousands of pieces copies a shared buffer alone", "[shm]") {
    ScopedEnv alone("BMI_SHM_SPLIT_COPY", "0");
    constexpr std::size_t size = (2 << 20) + 9;
    SharedPair shared(size);
    std::vector<char> plain_in(size + 64);
    shared.exchange(plain_in.data(), 1300, 3000);
    REQUIRE(large_receives(shared.pumped.pair.server, size, TakenPath::shared_single) == 1u);
}

// Freed shared buffers are withdrawn from the peer before their memory can come back as a
// new buffer, often at the same address: the peer must never copy from the old one.
TEST_CASE("shm: buffers freed and allocated again never deliver stale bytes", "[shm]") {
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    for (std::uint32_t round = 0; round < 24; ++round) {
        // Sizes that shrink and grow, so new buffers overlap old ones in every way.
        std::size_t size = ((round * 7) % 5 + 1) * (300 << 10) + round;
        SharedBuffer out(pair.client, pair.server_addr, size);
        SharedBuffer in(pair.server, client_addr, size + 64);
        exchange_from(pair, client_addr, out.data(), in.data(), size, 900 + round, 1 + round % 3);
    }
}

TEST_CASE("shm: split copy needs no help from a sender that does not poll", "[shm]") {
    ScopedEnv split("BMI_SHM_SPLIT_COPY", "1");
    Pair pair = make_peers("shm");
    BMI_addr_t client_addr = 0;
    {
        Pump client_pump(*pair.client.instance);  // only for the introduction
        client_addr = introduce(pair);
    }
    constexpr std::size_t size = 4 << 20;
    std::vector<char> out(size), in(size);
    fill_pattern(out.data(), size, 77);
    bmi_op_id_t rid = 0, sid = 0;
    // The send's post places the announcement; after that the client makes no progress.
    post_receive_then_send(pair, client_addr, in.data(), out.data(), size, 9, rid, sid);
    auto got = wait_op(pair.server, rid, 20000);  // the server copies every chunk itself
    REQUIRE(got.error == 0);
    REQUIRE(check_pattern(in.data(), size, 77));
    REQUIRE(wait_op(pair.client, sid, 20000).error == 0);  // DONE was waiting in its ring
}

// From a shared buffer the receiver can copy a message alone and without the kernel: with
// cross-memory attach off and a sender that makes no progress after its post, no other path
// could deliver it (streaming needs the sender, process_vm_readv is off).
TEST_CASE("shm: a shared buffer is copied by the receiver alone, without cross-memory attach",
          "[shm]") {
    ScopedEnv force("BMI_SHM_SINGLE_COPY", "0");
    Pair pair = make_peers("shm");
    BMI_addr_t client_addr = 0;
    {
        Pump client_pump(*pair.client.instance);  // only for the introduction
        client_addr = introduce(pair);
    }
    // The hello reply is in the client's socket by now; one polling pass reads it, so the
    // connection is open and the post below can offer the buffer.
    int outcount = 0;
    core::Completion none[1];
    REQUIRE(pair.client.instance->testcontext(pair.client.context, 0, outcount, none) == 0);
    REQUIRE(outcount == 0);
    constexpr std::size_t size = 4 << 20;
    SharedBuffer out(pair.client, pair.server_addr, size);
    std::vector<char> in(size);
    fill_pattern(out.data(), size, 78);
    bmi_op_id_t rid = 0, sid = 0;
    post_receive_then_send(pair, client_addr, in.data(), out.data(), size, 10, rid, sid);
    auto got = wait_op(pair.server, rid, 20000);
    REQUIRE(got.error == 0);
    REQUIRE(check_pattern(in.data(), size, 78));
    REQUIRE(wait_op(pair.client, sid, 20000).error == 0);
}

TEST_CASE("shm: a cancelled split receive is never written afterwards; the pair stays usable",
          "[shm]") {
    ScopedEnv split("BMI_SHM_SPLIT_COPY", "1");
    Pair pair = make_peers("shm");
    BMI_addr_t client_addr = introduce(pair);
    Pump client_pump(*pair.client.instance);  // the sender helps as fast as it can
    constexpr std::size_t size = 64 << 20;
    std::vector<char> out(size), in(size, 0);
    fill_pattern(out.data(), size, 11);
    bmi_op_id_t rid = 0, sid = 0;
    post_receive_then_send(pair, client_addr, in.data(), out.data(), size, 4, rid, sid);
    // Let the server start the split (one bounded step of its own), then cancel while the
    // client's pump is writing its chunks.
    int outcount = 0;
    core::Completion done;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        REQUIRE(pair.server.instance->test(rid, pair.server.context, 0, outcount, done) == 0);
        if (outcount == 1 || std::count(in.begin(), in.begin() + (1 << 20), 0) < (1 << 20)) break;
    }
    if (outcount == 0) {
        REQUIRE(pair.server.instance->cancel(rid, pair.server.context) == 0);
        done = wait_op(pair.server, rid, 10000);
    }
    // Finished or cancelled, the buffer is the receive's no more: nothing may change it now.
    REQUIRE((done.error == 0 || done.error == -BMI_ECANCEL));
    std::vector<char> snapshot(in);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(snapshot == in);
    // The sender learns the receive's outcome: DONE, or a NAK carrying the cancel.
    auto sent = wait_op(pair.client, sid, 10000);
    REQUIRE(sent.error == done.error);

    // Same connection, next message.
    std::vector<char> again(1 << 20);
    fill_pattern(out.data(), 1 << 20, 12);
    post_receive_then_send(pair, client_addr, again.data(), out.data(), 1 << 20, 5, rid, sid);
    REQUIRE(wait_op(pair.server, rid).error == 0);  // the server has no pump: drive it here
    REQUIRE(check_pattern(again.data(), 1 << 20, 12));
    REQUIRE(wait_op(pair.client, sid).error == 0);
}

TEST_CASE("shm: more large receives at once than split board entries all arrive", "[shm]") {
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    constexpr int count = 24;  // the board has 16 entries; the rest take another path
    constexpr std::size_t size = 300000;
    std::vector<std::vector<char>> out(count, std::vector<char>(size)),
        in(count, std::vector<char>(size));
    std::vector<bmi_op_id_t> rids(count), sids(count);
    for (int i = 0; i < count; ++i) {
        fill_pattern(out[static_cast<std::size_t>(i)].data(), size,
                     500 + static_cast<std::uint32_t>(i));
        REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr,
                                                        in[static_cast<std::size_t>(i)].data(),
                                                        size, 100 + i),
                                           rids[static_cast<std::size_t>(i)], nullptr) == 0);
    }
    for (int i = 0; i < count; ++i)
        REQUIRE(pair.client.instance->post(send_request(pair.client, pair.server_addr,
                                                        out[static_cast<std::size_t>(i)].data(),
                                                        size, 100 + i),
                                           sids[static_cast<std::size_t>(i)], nullptr) >= 0);
    for (int i = 0; i < count; ++i) {
        REQUIRE(wait_op(pair.server, rids[static_cast<std::size_t>(i)], 20000).error == 0);
        REQUIRE(check_pattern(in[static_cast<std::size_t>(i)].data(), size,
                              500 + static_cast<std::uint32_t>(i)));
    }
    for (int i = 0; i < count; ++i)
        if (sids[static_cast<std::size_t>(i)] != 0)
            REQUIRE(wait_op(pair.client, sids[static_cast<std::size_t>(i)], 20000).error == 0);
}

// A ring of 8 slots x 1 KiB wraps every few messages and is full most of the time under a
// sender that posts a whole burst at once; every size class crosses it, in order.
TEST_CASE("shm: a small ring wraps and fills under a fast sender, nothing lost or reordered",
          "[shm]") {
    Pair pair = make_peers("shm", "shm_ring_slots=8,shm_slot_size=1024");
    Pump server_pump(*pair.server.instance);
    BMI_addr_t client_addr = introduce(pair);
    const std::vector<std::size_t> sizes = {0, 1, 100, 1000, 1016, 3000, 3992, 5000, 40000};
    constexpr int rounds = 40;
    std::vector<std::vector<char>> out, in;
    std::vector<bmi_op_id_t> rids, sids;
    for (int round = 0; round < rounds; ++round)
        for (std::size_t size : sizes) {
            auto n = out.size();
            out.emplace_back(size);
            in.emplace_back(size + 1, 'x');
            fill_pattern(out.back().data(), size, static_cast<std::uint32_t>(n));
            bmi_op_id_t rid = 0;
            REQUIRE(
                pair.server.instance->post(recv_request(pair.server, client_addr, in.back().data(),
                                                        static_cast<bmi_size_t>(size), 3),
                                           rid, nullptr) == 0);
            rids.push_back(rid);
        }
    // One tag for all: matching order is arrival order, so any reordering shows as a mismatch.
    for (std::size_t i = 0; i < out.size(); ++i) {
        bmi_op_id_t sid = 0;
        int rc =
            pair.client.instance->post(send_request(pair.client, pair.server_addr, out[i].data(),
                                                    static_cast<bmi_size_t>(out[i].size()), 3),
                                       sid, nullptr);
        REQUIRE(rc >= 0);
        if (rc == 0) sids.push_back(sid);
    }
    for (auto sid : sids) REQUIRE(wait_op(pair.client, sid, 20000).error == 0);
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto got = wait_op(pair.server, rids[i], 20000);
        REQUIRE(got.error == 0);
        REQUIRE(got.actual_size == static_cast<bmi_size_t>(out[i].size()));
        REQUIRE(check_pattern(in[i].data(), out[i].size(), static_cast<std::uint32_t>(i)));
        REQUIRE(in[i][out[i].size()] == 'x');
    }
}

TEST_CASE("shm: a listener with larger rings than its client sends within the client's", "[shm]") {
    // The connection's rings have the client's geometry: 4 slots of 256 bytes, so one record
    // carries at most 2 * 256 - 8 - 32 = 472 payload bytes. The listener's own rings and
    // eager limit (16 KiB) are larger. It used to place eager messages of up to 16 KiB in
    // those rings regardless: above 472 bytes the client refused the record and closed the
    // connection, above 1 KiB the message never left.
    Pair pair = make_peers("shm", "", std::string("shm_ring_slots=4,shm_slot_size=256"));
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    BMI_addr_t client_addr = introduce(pair);
    const std::vector<std::size_t> sizes = {0, 100, 472, 473, 600, 1000, 16384, 100000};
    std::uint32_t seed = 1;
    for (std::size_t size : sizes) {
        const auto length = static_cast<bmi_size_t>(size);
        std::vector<char> down(size), up(size), got_down(size + 1, 'x'), got_up(size + 1, 'x');
        fill_pattern(down.data(), size, seed);
        fill_pattern(up.data(), size, seed + 1);
        bmi_op_id_t client_rid = 0, server_rid = 0;
        REQUIRE(pair.client.instance->post(
                    recv_request(pair.client, pair.server_addr, got_down.data(), length, 4),
                    client_rid, nullptr) == 0);
        REQUIRE(pair.server.instance->post(
                    recv_request(pair.server, client_addr, got_up.data(), length, 5), server_rid,
                    nullptr) == 0);
        INFO("size " << size);
        REQUIRE(post_and_wait(pair.server,
                              send_request(pair.server, client_addr, down.data(), length, 4))
                    .error == 0);
        REQUIRE(post_and_wait(pair.client,
                              send_request(pair.client, pair.server_addr, up.data(), length, 5))
                    .error == 0);
        auto at_client = wait_op(pair.client, client_rid);
        auto at_server = wait_op(pair.server, server_rid);
        REQUIRE(at_client.error == 0);
        REQUIRE(at_server.error == 0);
        REQUIRE(at_client.actual_size == length);
        REQUIRE(at_server.actual_size == length);
        CHECK(check_pattern(got_down.data(), size, seed));
        CHECK(check_pattern(got_up.data(), size, seed + 1));
        CHECK(got_down[size] == 'x');
        seed += 2;
    }
    // An unexpected message has no way but one record: beyond the connection's limit it fails
    // with EMSGSIZE, within it it arrives, and the connection stays usable either way.
    std::vector<char> note(600, 'n');
    auto too_big = unexpected_request(pair.server, client_addr, note.data(), 473, 6);
    bmi_op_id_t big_id = 0;
    const int big_rc = pair.server.instance->post(too_big, big_id, nullptr);
    // Refused at once (the usual case) or, had it queued behind another send, in completion.
    if (big_rc == 0)
        REQUIRE(wait_op(pair.server, big_id).error == -BMI_EMSGSIZE);
    else
        REQUIRE(big_rc == -BMI_EMSGSIZE);
    auto fits = unexpected_request(pair.server, client_addr, note.data(), 472, 6);
    REQUIRE(post_and_wait(pair.server, fits).error == 0);
    auto got = wait_unexpected(pair.client);
    CHECK(got.size == 472);
    CHECK(got.tag == 6);
    REQUIRE(pair.client.instance->unexpected_free(got.buffer) == 0);
}

TEST_CASE("shm: a ring geometry that is not a power of two is refused", "[shm]") {
    std::unique_ptr<core::Instance> instance;
    core::InitParams params;
    params.method_list = "bmi_shm";
    params.listen = test_listen_address("shm");
    params.flags = BMI_INIT_SERVER;
    params.options = "shm_ring_slots=100";
    REQUIRE(core::Instance::create(params, instance) == -BMI_EINVAL);
    params.options = "shm_slot_size=3000";
    REQUIRE(core::Instance::create(params, instance) == -BMI_EINVAL);
    params.options = "shm_ring_slots=16,shm_slot_size=512";
    REQUIRE(core::Instance::create(params, instance) == 0);
}

TEST_CASE("shm: a receive smaller than a large message fails both ends with EMSGSIZE", "[shm]") {
    auto single = GENERATE("1", "0");
    ScopedEnv force("BMI_SHM_SINGLE_COPY", single);
    ScopedEnv all_single("BMI_SHM_SINGLE_COPY_MIN", "0");
    PumpedPair pumped;
    Pair& pair = pumped.pair;
    BMI_addr_t client_addr = pumped.client_addr;
    std::vector<char> out(1 << 20), in(1 << 19);
    bmi_op_id_t rid = 0, sid = 0;
    REQUIRE(pair.server.instance->post(
                recv_request(pair.server, client_addr, in.data(), 1 << 19, 2), rid, nullptr) == 0);
    REQUIRE(pair.client.instance->post(
                send_request(pair.client, pair.server_addr, out.data(), 1 << 20, 2), sid,
                nullptr) == 0);
    REQUIRE(wait_op(pair.server, rid).error == -BMI_EMSGSIZE);
    REQUIRE(wait_op(pair.client, sid).error == -BMI_EMSGSIZE);
}

TEST_CASE("shm: eight clients on one listener", "[shm]") {
    constexpr int clients = 8;
    core::InitParams server_params;
    server_params.listen = test_listen_address("shm");
    server_params.flags = BMI_INIT_SERVER;
    std::unique_ptr<core::Instance> server;
    REQUIRE(core::Instance::create(server_params, server) == 0);
    bmi_context_id server_context = -1;
    REQUIRE(server->open_context(server_context) == 0);

    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
            std::unique_ptr<core::Instance> client;
            bmi_context_id context = -1;
            BMI_addr_t server_addr = 0;
            if (core::Instance::create({}, client) != 0 || client->open_context(context) != 0 ||
                client->addr_lookup(server_params.listen, server_addr) != 0) {
                ++failures;
                return;
            }
            std::vector<char> reply(100000);
            core::PostRequest recv;
            recv.kind = method::OpKind::recv;
            recv.addr = server_addr;
            recv.buffer = reply.data();
            recv.size = static_cast<bmi_size_t>(reply.size());
            recv.tag = 7;
            recv.context = context;
            bmi_op_id_t rid = 0, sid = 0;
            if (client->post(recv, rid, nullptr) != 0) ++failures;
            int hello = c;
            core::PostRequest send = recv;
            send.kind = method::OpKind::send_unexpected;
            send.buffer = &hello;
            send.size = sizeof hello;
            send.tag = 1;
            int rc = client->post(send, sid, nullptr);
            if (rc < 0) ++failures;
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            for (bmi_op_id_t id : {rc == 0 ? sid : bmi_op_id_t{0}, rid}) {
                if (id == 0) continue;
                int outcount = 0;
                core::Completion done;
                while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
                    client->test(id, context, 20, outcount, done);
                if (outcount != 1 || done.error != 0) ++failures;
            }
            if (!check_pattern(reply.data(), reply.size(), 100 + static_cast<std::uint32_t>(c)))
                ++failures;
        });
    }
    // The server answers each client at the address its unexpected message came from.
    std::vector<std::vector<char>> replies(clients, std::vector<char>(100000));
    std::vector<bmi_op_id_t> sends;
    int seen = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (seen < clients && std::chrono::steady_clock::now() < deadline) {
        core::UnexpectedMessage got[clients];
        int outcount = 0;
        REQUIRE(server->testunexpected(20, outcount, got) == 0);
        for (int i = 0; i < outcount; ++i) {
            int c = -1;
            REQUIRE(got[i].size == sizeof c);
            std::memcpy(&c, got[i].buffer, sizeof c);
            REQUIRE(server->unexpected_free(got[i].buffer) == 0);
            REQUIRE((c >= 0 && c < clients));
            auto& reply = replies[static_cast<std::size_t>(c)];
            fill_pattern(reply.data(), reply.size(), 100 + static_cast<std::uint32_t>(c));
            core::PostRequest send;
            send.kind = method::OpKind::send;
            send.addr = got[i].addr;
            send.buffer = reply.data();
            send.size = static_cast<bmi_size_t>(reply.size());
            send.tag = 7;
            send.context = server_context;
            bmi_op_id_t id = 0;
            int rc = server->post(send, id, nullptr);
            REQUIRE(rc >= 0);
            if (rc == 0) sends.push_back(id);
            ++seen;
        }
    }
    REQUIRE(seen == clients);
    Side side{std::move(server), server_context};
    for (auto id : sends) REQUIRE(wait_op(side, id, 20000).error == 0);
    for (auto& t : threads) t.join();
    REQUIRE(failures.load() == 0);
}

TEST_CASE("shm: connections leave nothing in /dev/shm and no descriptors behind",
          "[shm][dev_shm]") {
    auto shm_before = directory("/dev/shm");
    auto fds_before = directory("/proc/self/fd").size();
    {
        Pair pair = make_peers("shm");
        Pump server_pump(*pair.server.instance);
        Pump client_pump(*pair.client.instance);
        BMI_addr_t client_addr = introduce(pair);
        std::vector<char> out(1 << 20), in(1 << 20);
        bmi_op_id_t rid = 0;
        REQUIRE(pair.server.instance->post(
                    recv_request(pair.server, client_addr, in.data(), 1 << 20, 3), rid, nullptr) ==
                0);
        REQUIRE(post_and_wait(pair.client,
                              send_request(pair.client, pair.server_addr, out.data(), 1 << 20, 3))
                    .error == 0);
        REQUIRE(wait_op(pair.server, rid).error == 0);
        // While connected the segment is visible only as a memfd, never as a file.
        REQUIRE(directory("/dev/shm") == shm_before);
    }
    REQUIRE(directory("/dev/shm") == shm_before);
    REQUIRE(directory("/proc/self/fd").size() == fds_before);
}
