// SPDX-License-Identifier: LGPL-2.1-or-later
// Encrypted tcp end to end (issue 39, doc/security.md): a relay on 127.0.0.1 between a client
// and a server records both directions, and may flip a bit or strip the cipher offer. With
// encryption the pattern the client sends (unexpected, eager, rendezvous and list messages)
// never shows in the recording; with it off it does, so the check can fail. A damaged record
// closes that connection with -BMI_EPROTO and delivers nothing, while a second client is
// served; a stripped offer is refused; a 16 MiB transfer crosses many rekeys intact.
// The client behind the relay is the C API instance (it has list I/O); the server and the
// second client are sessions of the C++ API in the same process, all on real sockets.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bmi.h"
#include "bmi/bmi.hpp"
#include "methods/tcp/tcp_records.hpp"
#include "methods/tcp/tcp_wire.hpp"
#include "support/keys/record_cipher.hpp"
#include "support/keys/secret_key.hpp"
#include "support/keys/traffic_keys.hpp"

using namespace std::chrono_literals;

namespace {

// A keyed handshake binds the acceptor's endpoint as both sides see it, so a relay at another
// address is refused before any record (tcp_keys_test). To stand in the path unseen, the relay
// listens at the server's own address, 127.0.0.1:PORT, in another network namespace: the
// client lives in `near`, the server in `far`, and only the relay has a socket in each.
// Needs root (CI runs as root): the cases that need it carry the tag [netns], and the meson
// test that runs them reports a skip (77) where namespaces cannot be made (see main).
struct NetNamespaces {
    int original = -1, near = -1, far = -1;
    bool ok = false;

    static bool loopback_up() {
        const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq req{};
        std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
        const bool up = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &req) == 0 &&
                        ((req.ifr_flags |= IFF_UP), ioctl(fd, SIOCSIFFLAGS, &req) == 0);
        if (fd >= 0) close(fd);
        return up;
    }
    static int fresh() {
        if (unshare(CLONE_NEWNET) != 0 || !loopback_up()) return -1;
        return open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    }
    NetNamespaces() {
        original = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        near = fresh();
        far = near >= 0 ? fresh() : -1;
        ok = original >= 0 && near >= 0 && far >= 0;
        enter(original);
    }
    ~NetNamespaces() {
        enter(original);
        for (int fd : {original, near, far})
            if (fd >= 0) close(fd);
    }
    static void enter(int fd) {
        if (fd >= 0) setns(fd, CLONE_NEWNET);
    }
};

constexpr std::string_view marker = "issue-39-plaintext-marker";

// A buffer of `size` bytes that carries the marker every 4 KiB, the rest a counting pattern.
std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
    std::vector<std::byte> out(size);
    for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
    for (std::size_t at = 0; at + marker.size() <= size; at += 4096)
        std::memcpy(out.data() + at, marker.data(), marker.size());
    return out;
}

// Whether two buffers match, as one bool: Catch would print a failed comparison of the
// buffers themselves byte by byte, which for megabytes under a sanitizer outlasts the test's
// time limit.
bool same(const std::vector<std::byte>& got, const std::vector<std::byte>& sent) {
    return got == sent;
}

bool contains_marker(const std::vector<std::uint8_t>& bytes) {
    return std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end()) != bytes.end();
}

// Forwards every connection made to it to `target`; see the file comment.
class Relay {
public:
    // What happens to the first record the client writes once armed (arm()); strip_offer
    // instead zeroes the cipher offer of each connection's HELLO, change_limit sets the
    // unexpected limit it states to 1 byte, strip_large_eager clears its feature bit 3.
    enum class Tamper {
        none,
        flip_armed_record,      // one bit of its ciphertext flipped
        drop_armed_record,      // never forwarded
        repeat_armed_record,    // forwarded twice
        swap_armed_record,      // forwarded after the record behind it
        truncate_armed_record,  // half of it forwarded, then the stream to the server ends
        stall_armed_record,     // half of it forwarded, then nothing more while open
        strip_offer,
        change_limit,
        strip_large_eager,
    };

    Relay(const NetNamespaces& ns, std::uint16_t target, Tamper tamper)
        : target_(target), tamper_(tamper) {
        NetNamespaces::enter(ns.near);
        listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(target);
        REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(listen_fd_, 8) == 0);
        port_ = target;
        const int far = ns.far;
        thread_ = std::thread([this, far] {
            NetNamespaces::enter(far);
            run();
        });
    }
    ~Relay() {
        stop_ = true;
        thread_.join();
        for (auto& p : pairs_) {
            close(p.client);
            close(p.server);
        }
        close(listen_fd_);
    }
    std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
    void arm() { armed_ = true; }
    bool tampered() const { return tampered_; }
    bool stripped() const { return stripped_; }
    // The first connection's bytes: the client's (up) and the server's (down), as written.
    std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> first_connection() {
        std::lock_guard lock(mutex_);
        if (pairs_.empty()) return {};
        return {pairs_.front().up, pairs_.front().down};
    }
    std::vector<std::uint8_t> recording() {
        std::lock_guard lock(mutex_);
        std::vector<std::uint8_t> all;
        for (auto& p : pairs_) {
            all.insert(all.end(), p.up.begin(), p.up.end());
            all.insert(all.end(), p.down.begin(), p.down.end());
        }
        return all;
    }

private:
    struct Pair {
        int client = -1, server = -1;
        std::vector<std::uint8_t> up, down;  // as the client and the server wrote them
        std::vector<std::uint8_t> held;      // client bytes not forwarded yet
        std::size_t parsed = 0;              // up: start of the next frame or record
        int frames_left = 2;                 // HELLO and HELLO_PROOF come before records
        std::vector<std::uint8_t> swapped;   // swap: the armed record, behind the next one
        bool cut = false;                    // truncate, stall: nothing more goes up
        bool end_after = false;              // truncate: end the stream once `out` is sent
    };

    static std::uint64_t le(const std::uint8_t* p, int n) {
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
        return v;
    }

    // One whole record of the client's, into `out` as the tamper mode says.
    void pass_record(Pair& p, std::uint8_t* at, std::size_t whole, std::vector<std::uint8_t>& out) {
        if (p.cut) return;
        const auto put = [&out](const std::uint8_t* from, std::size_t n) {
            out.insert(out.end(), from, from + n);
        };
        if (!p.swapped.empty()) {
            put(at, whole);
            put(p.swapped.data(), p.swapped.size());
            p.swapped.clear();
            return;
        }
        if (!armed_.exchange(false)) {
            put(at, whole);
            return;
        }
        tampered_ = true;
        switch (tamper_) {
            case Tamper::flip_armed_record:
                at[4 + (whole - 20) / 2] ^= 0x10;
                put(at, whole);
                break;
            case Tamper::drop_armed_record:
                break;
            case Tamper::repeat_armed_record:
                put(at, whole);
                put(at, whole);
                break;
            case Tamper::swap_armed_record:
                p.swapped.assign(at, at + whole);
                break;
            case Tamper::truncate_armed_record:
            case Tamper::stall_armed_record:
                put(at, whole / 2);
                p.cut = true;
                p.end_after = tamper_ == Tamper::truncate_armed_record;
                break;
            default:
                put(at, whole);
        }
    }

    // Walks the client's stream (two handshake frames, then records) and returns what goes up
    // now: whole frames and records, tampered with as armed; a partial one waits in `up`.
    std::vector<std::uint8_t> walk(Pair& p) {
        std::vector<std::uint8_t> out;
        while (true) {
            std::uint8_t* at = p.up.data() + p.parsed;
            const std::size_t have = p.up.size() - p.parsed;
            std::size_t whole = 0;
            if (p.frames_left > 0) {
                if (have < 24) break;
                whole = 24 + le(at + 16, 8);
                if (have < whole) break;
                out.insert(out.end(), at, at + whole);
                --p.frames_left;
            } else {
                if (have < 4) break;
                whole = 4 + le(at, 4) + 16;
                if (have < whole) break;
                pass_record(p, at, whole, out);
            }
            p.parsed += whole;
        }
        return out;
    }

    // The tampers that change the client's HELLO (strip()) rather than a record.
    bool tampers_hello() const {
        return tamper_ == Tamper::strip_offer || tamper_ == Tamper::change_limit ||
               tamper_ == Tamper::strip_large_eager;
    }

    // The HELLO's cipher byte (after features, address length, address and nonce) set to 0,
    // the upper half of its features word (the unexpected limit) set to 1, or its bit 3 cleared.
    bool strip(Pair& p) {
        if (p.held.size() < 24) return false;
        const std::size_t size = le(p.held.data() + 16, 8);
        if (p.held.size() < 24 + size) return false;
        if (tamper_ == Tamper::change_limit) {
            const std::uint8_t one[4] = {1, 0, 0, 0};
            std::memcpy(p.held.data() + 24 + 4, one, sizeof one);
            stripped_ = true;
            return true;
        }
        if (tamper_ == Tamper::strip_large_eager) {
            p.held[24] &= static_cast<std::uint8_t>(~0x08u);
            stripped_ = true;
            return true;
        }
        const std::size_t addr_len = le(p.held.data() + 24 + 8, 2);
        const std::size_t at = 24 + 10 + addr_len + 32;
        if (at < 24 + size) {
            p.held[at] = 0;
            stripped_ = true;
        }
        return true;
    }

    void forward(Pair& p, bool upward) {
        std::uint8_t buffer[65536];
        const ssize_t n = recv(upward ? p.client : p.server, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                shutdown(p.client, SHUT_RDWR);
                shutdown(p.server, SHUT_RDWR);
            }
            return;
        }
        std::vector<std::uint8_t> out;
        {
            std::lock_guard lock(mutex_);
            if (!upward) {
                p.down.insert(p.down.end(), buffer, buffer + n);
                out.assign(buffer, buffer + n);
            } else if (tampers_hello() && p.up.empty()) {
                p.held.insert(p.held.end(), buffer, buffer + n);
                if (!strip(p)) return;
                out.swap(p.held);
                p.up = out;
            } else if (tamper_ == Tamper::none || tampers_hello()) {
                p.up.insert(p.up.end(), buffer, buffer + n);
                out.assign(buffer, buffer + n);
            } else {
                p.up.insert(p.up.end(), buffer, buffer + n);
                out = walk(p);
            }
        }
        const int to = upward ? p.server : p.client;
        for (std::size_t done = 0; done < out.size();) {
            const ssize_t w = send(to, out.data() + done, out.size() - done, MSG_NOSIGNAL);
            if (w <= 0) {
                if (w < 0 && errno == EINTR) continue;
                if (w < 0 && errno == EAGAIN) {
                    pollfd wait{to, POLLOUT, 0};
                    poll(&wait, 1, 100);
                    continue;
                }
                return;
            }
            done += static_cast<std::size_t>(w);
        }
        if (upward && p.end_after) {
            p.end_after = false;
            shutdown(p.server, SHUT_WR);
        }
    }

    void run() {
        while (!stop_) {
            std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
            for (auto& p : pairs_) {
                fds.push_back({p.client, POLLIN, 0});
                fds.push_back({p.server, POLLIN, 0});
            }
            if (poll(fds.data(), fds.size(), 20) <= 0) continue;
            if (fds[0].revents & POLLIN) {
                const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
                const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                sockaddr_in a{};
                a.sin_family = AF_INET;
                a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                a.sin_port = htons(target_);
                if (c >= 0 && s >= 0 &&
                    connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
                    std::lock_guard lock(mutex_);
                    Pair pair;
                    pair.client = c;
                    pair.server = s;
                    pairs_.push_back(std::move(pair));
                } else {
                    if (c >= 0) close(c);
                    if (s >= 0) close(s);
                }
                continue;  // fds no longer matches pairs_
            }
            for (std::size_t i = 0; i < pairs_.size(); ++i) {
                if (fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) forward(pairs_[i], true);
                if (fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR))
                    forward(pairs_[i], false);
            }
        }
    }

    std::uint16_t target_;
    Tamper tamper_;
    int listen_fd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false}, armed_{false}, tampered_{false}, stripped_{false};
    std::mutex mutex_;
    std::vector<Pair> pairs_;  // appended by the relay thread only; read under mutex_
};

std::uint16_t port_of(const std::string& address) {
    return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

struct KeyDir {
    std::filesystem::path dir;
    std::string key;
    KeyDir() {
        dir = std::filesystem::temp_directory_path() / ("bmi-enc-" + std::to_string(getpid()));
        std::filesystem::create_directories(dir);
        key = (dir / "k").string();
        std::ofstream(key) << std::string(64, 'a') << "\n";
        chmod(key.c_str(), 0600);
    }
    ~KeyDir() { std::filesystem::remove_all(dir); }
};

std::unique_ptr<bmi::Session> start_server(const std::string& options) {
    auto r = bmi::Session::create({"bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER, options});
    REQUIRE(r);
    return std::move(*r);
}

// The C API client, one per test case.
struct CClient {
    bmi_context_id ctx{};
    BMI_addr_t server{};
    int lookup = 0;
    CClient(const std::string& options, const std::string& to) {
        std::string opts = options;
        REQUIRE(BMI_initialize("bmi_tcp", nullptr, 0, opts.data()) == 0);
        REQUIRE(BMI_open_context(&ctx) == 0);
        lookup = BMI_addr_lookup(&server, to.c_str(), nullptr);
    }
    ~CClient() {
        BMI_close_context(ctx);
        BMI_finalize();
    }
};

// One operation of either API, tested until it completes.
struct Op {
    bmi_op_id_t id = 0;
    bool done = false;
    int error = 0;  // 0 or -BMI_E*
    bmi_size_t size = 0;
};

// id by reference: the post that sets it is evaluated among the same arguments.
Op c_posted(int rc, const bmi_op_id_t& id, bmi_size_t size) {
    Op op;
    op.id = id;
    if (rc != 0) {
        op.done = true;
        op.error = rc < 0 ? rc : 0;
        op.size = size;
    }
    return op;
}

// The client's unexpected send of `msg` with tag 1, as posted; msg lives until it ends.
Op c_send_unexpected(CClient& client, const std::vector<std::byte>& msg) {
    bmi_op_id_t id = 0;
    return c_posted(BMI_post_sendunexpected(&id, client.server, msg.data(), msg.size(),
                                            BMI_EXT_ALLOC, 1, nullptr, client.ctx, 0),
                    id, msg.size());
}

void c_poll(CClient& c, Op& op) {
    if (op.done) return;
    int out = 0;
    bmi_error_code_t err = 0;
    bmi_size_t size = 0;
    void* user = nullptr;
    if (BMI_test(op.id, &out, &err, &size, &user, 1, c.ctx) < 0) return;
    if (out > 0) {
        op.done = true;
        op.error = err;
        op.size = size;
    }
}

Op s_posted(const bmi::Result<bmi::Posted>& r) {
    Op op;
    if (!r) {
        op.done = true;
        op.error = -r.error().value();
        return op;
    }
    op.id = r->id;
    op.done = r->immediate;
    op.size = r->actual_size;
    return op;
}

void s_poll(bmi::Session& s, bmi::Context& ctx, Op& op) {
    if (op.done) return;
    auto r = s.test(ctx, op.id, 1ms);
    if (r && *r) {
        op.done = true;
        op.error = (*r)->error ? -(*r)->error.value() : 0;
        op.size = (*r)->actual_size;
    }
}

// Drives everything given until every op is done or 30 s pass.
template <typename Step>
bool drive(Step step, const std::vector<Op*>& ops) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
        step();
        if (std::all_of(ops.begin(), ops.end(), [](Op* o) { return o->done; })) return true;
    }
    return false;
}

// Waits for one unexpected message at s for `rounds` times 5 ms at most (the client's progress
// runs meanwhile); nothing if the client's send failed first.
std::optional<bmi::UnexpectedMessage> await_unexpected(bmi::Session& s, CClient* c, Op* pending,
                                                       int rounds = 3000) {
    for (int i = 0; i < rounds; ++i) {
        if (c != nullptr && pending != nullptr) c_poll(*c, *pending);
        auto got = s.test_unexpected(1, 5ms);
        REQUIRE(got);
        if (!got->empty()) return std::move(got->front());
        if (pending != nullptr && pending->done && pending->error != 0) return std::nullopt;
    }
    return std::nullopt;
}

std::string opts(const KeyDir& k, const std::string& policy, const std::string& extra = "") {
    return "key_file=" + k.key + ",encryption=" + policy + (extra.empty() ? "" : "," + extra);
}

// A server in ns.far, the relay at its address, and the C API client behind the relay in
// ns.near (where the calling thread is left). `ready` is false without namespaces.
struct RelayedPair {
    NetNamespaces ns;
    KeyDir k;
    bool ready = false;
    std::unique_ptr<bmi::Session> server;
    std::optional<bmi::Context> sctx;
    std::unique_ptr<Relay> relay;
    std::unique_ptr<CClient> client;

    RelayedPair(const std::string& options, Relay::Tamper tamper) {
        if (!ns.ok) {
            WARN("no network namespaces here (not root?): the relay cannot stand in the path");
            return;
        }
        NetNamespaces::enter(ns.far);
        const std::string o = "key_file=" + k.key + "," + options;
        server = start_server(o);
        auto ctx = server->open_context();
        REQUIRE(ctx);
        sctx.emplace(std::move(*ctx));
        relay = std::make_unique<Relay>(ns, port_of(server->listen_address()), tamper);
        client = std::make_unique<CClient>(o, relay->address());
        REQUIRE(client->lookup == 0);
        ready = true;
    }
    ~RelayedPair() {
        client.reset();
        relay.reset();
    }
    // The client's first message (unexpected, `msg`), as the server got it.
    bmi::UnexpectedMessage introduce(const std::vector<std::byte>& msg) {
        bmi_op_id_t id = 0;
        Op first = c_posted(BMI_post_sendunexpected(&id, client->server, msg.data(), msg.size(),
                                                    BMI_EXT_ALLOC, 1, nullptr, client->ctx, 0),
                            id, msg.size());
        auto hello = await_unexpected(*server, client.get(), &first);
        REQUIRE(hello);
        REQUIRE(drive([&] { c_poll(*client, first); }, {&first}));
        return std::move(*hello);
    }
};

// Sends the pattern as unexpected, eager, rendezvous and list messages through the relay and
// checks that each arrives intact; the relay's recording.
std::vector<std::uint8_t> exchange_through_relay(const std::string& policy, bool& ran) {
    RelayedPair path("encryption=" + policy, Relay::Tamper::none);
    if (!path.ready) return {};
    ran = true;
    auto& server = path.server;
    auto& sctx = path.sctx;
    CClient& client = *path.client;
    const auto small = pattern(4096, 1);
    const auto hello = path.introduce(small);
    REQUIRE(hello.data().size() == small.size());
    CHECK(std::memcmp(hello.data().data(), small.data(), small.size()) == 0);
    const bmi::Address from = hello.from();
    bmi_op_id_t id = 0;

    const auto eager = pattern(8192, 2);
    const auto big = pattern(3 << 19, 3);  // 1.5 MiB: rendezvous
    const auto listed = pattern(3 * 20000, 4);
    std::vector<std::byte> got_eager(eager.size()), got_big(big.size()), got_list(listed.size());
    Op r1 = s_posted(server->post_recv(*sctx, from, got_eager, 2));
    Op r2 = s_posted(server->post_recv(*sctx, from, got_big, 3));
    Op r3 = s_posted(server->post_recv(*sctx, from, got_list, 4));
    Op s1 = c_posted(BMI_post_send(&id, client.server, eager.data(), 8192, BMI_EXT_ALLOC, 2,
                                   nullptr, client.ctx, 0),
                     id, 8192);
    Op s2 = c_posted(BMI_post_send(&id, client.server, big.data(), big.size(), BMI_EXT_ALLOC, 3,
                                   nullptr, client.ctx, 0),
                     id, big.size());
    const void* pieces[3] = {listed.data(), listed.data() + 20000, listed.data() + 40000};
    const bmi_size_t sizes[3] = {20000, 20000, 20000};
    Op s3 = c_posted(BMI_post_send_list(&id, client.server, pieces, sizes, 3, 60000, BMI_EXT_ALLOC,
                                        4, nullptr, client.ctx, 0),
                     id, 60000);
    REQUIRE(drive(
        [&] {
            for (Op* o : {&s1, &s2, &s3}) c_poll(client, *o);
            for (Op* o : {&r1, &r2, &r3}) s_poll(*server, *sctx, *o);
        },
        {&s1, &s2, &s3, &r1, &r2, &r3}));
    for (Op* o : {&s1, &s2, &s3, &r1, &r2, &r3}) CHECK(o->error == 0);
    CHECK(same(got_eager, eager));
    CHECK(same(got_big, big));
    CHECK(same(got_list, listed));
    return path.relay->recording();
}

}  // namespace

TEST_CASE("with encryption off the pattern shows on the wire, so the check below can fail",
          "[netns]") {
    bool ran = false;
    const auto recording = exchange_through_relay("off", ran);
    if (ran) CHECK(contains_marker(recording));
}

TEST_CASE("with encryption required nothing of the pattern shows on the wire", "[netns]") {
    bool ran = false;
    const auto recording = exchange_through_relay("require", ran);
    if (!ran) return;
    CHECK(recording.size() > (3u << 19));
    CHECK_FALSE(contains_marker(recording));
}

namespace {

// One client record damaged on the path (`tamper`): the server closes that connection with
// `expected`, delivers nothing of that record or after it, and still serves a second client.
void damaged_record_closes(Relay::Tamper tamper, int expected) {
    // A stall timeout short enough for the stalled record to run out within the test.
    RelayedPair path("encryption=require,tcp_stall_timeout_ms=500", tamper);
    if (!path.ready) return;
    auto& server = path.server;
    auto& sctx = path.sctx;
    auto& relay = *path.relay;
    CClient& client = *path.client;
    auto& k = path.k;
    auto& ns = path.ns;
    const bmi::Address from = path.introduce(pattern(64, 5)).from();
    bmi_op_id_t id = 0;
    // The second client dials the server straight, in its namespace.
    NetNamespaces::enter(ns.far);
    auto second = bmi::Session::create({"bmi_tcp", "", 0, opts(k, "require")});
    REQUIRE(second);
    auto second_ctx = (*second)->open_context();
    REQUIRE(second_ctx);
    auto second_to = (*second)->lookup(server->listen_address());
    REQUIRE(second_to);
    NetNamespaces::enter(ns.near);

    // The second client through its own connection, before and after the damage.
    const auto served = [&](unsigned seed) {
        const auto msg = pattern(1000, seed);
        Op sent = s_posted((*second)->post_send_unexpected(*second_ctx, *second_to, msg, 9));
        auto got = server->test_unexpected(1, 0ms);
        for (int i = 0; i < 3000 && got && got->empty(); ++i) {
            s_poll(**second, *second_ctx, sent);
            got = server->test_unexpected(1, 5ms);
        }
        return got && !got->empty() && got->front().data().size() == msg.size() &&
               std::memcmp(got->front().data().data(), msg.data(), msg.size()) == 0;
    };
    CHECK(served(6));

    // An eager message is two records (its header, then its payload); the first is damaged.
    // A second message follows it: nothing after the damage may arrive either.
    const auto secret = pattern(8192, 7);
    const auto after = pattern(8192, 8);
    std::vector<std::byte> into(secret.size(), std::byte{0}),
        into_after(after.size(), std::byte{0});
    Op recv = s_posted(server->post_recv(*sctx, from, into, 2));
    Op recv_after = s_posted(server->post_recv(*sctx, from, into_after, 4));
    std::vector<std::byte> answer(100);
    Op client_recv = c_posted(BMI_post_recv(&id, client.server, answer.data(), 100, nullptr,
                                            BMI_EXT_ALLOC, 3, nullptr, client.ctx, 0),
                              id, 0);
    relay.arm();
    Op send = c_posted(BMI_post_send(&id, client.server, secret.data(), secret.size(),
                                     BMI_EXT_ALLOC, 2, nullptr, client.ctx, 0),
                       id, secret.size());
    Op send_after = c_posted(BMI_post_send(&id, client.server, after.data(), after.size(),
                                           BMI_EXT_ALLOC, 4, nullptr, client.ctx, 0),
                             id, after.size());
    REQUIRE(drive(
        [&] {
            c_poll(client, send);
            c_poll(client, send_after);
            c_poll(client, client_recv);
            s_poll(*server, *sctx, recv);
            s_poll(*server, *sctx, recv_after);
        },
        {&recv, &recv_after, &client_recv}));
    CHECK(relay.tampered());
    CHECK(recv.error == expected);
    CHECK(recv_after.error == expected);
    CHECK(client_recv.error != 0);
    const auto zero = [](const std::vector<std::byte>& v) {
        return std::all_of(v.begin(), v.end(), [](std::byte b) { return b == std::byte{0}; });
    };
    CHECK(zero(into));
    CHECK(zero(into_after));
    CHECK(served(8));
}

}  // namespace

TEST_CASE("a flipped bit closes that connection with EPROTO; another client is served", "[netns]") {
    damaged_record_closes(Relay::Tamper::flip_armed_record, -BMI_EPROTO);
}

TEST_CASE("a dropped record closes that connection with EPROTO; another client is served",
          "[netns]") {
    damaged_record_closes(Relay::Tamper::drop_armed_record, -BMI_EPROTO);
}

TEST_CASE("a repeated record closes that connection with EPROTO; another client is served",
          "[netns]") {
    damaged_record_closes(Relay::Tamper::repeat_armed_record, -BMI_EPROTO);
}

TEST_CASE("two swapped records close that connection with EPROTO; another client is served",
          "[netns]") {
    damaged_record_closes(Relay::Tamper::swap_armed_record, -BMI_EPROTO);
}

TEST_CASE("a stream cut inside a record closes that connection with EPROTO", "[netns]") {
    damaged_record_closes(Relay::Tamper::truncate_armed_record, -BMI_EPROTO);
}

TEST_CASE("half a record and silence: the stall timeout closes that connection", "[netns]") {
    damaged_record_closes(Relay::Tamper::stall_armed_record, -BMI_ETIMEDOUT);
}

TEST_CASE("the pre-shared key and a recorded handshake do not open a recorded record", "[netns]") {
    RelayedPair path("encryption=require", Relay::Tamper::none);
    if (!path.ready) return;
    path.introduce(pattern(4096, 13));
    const auto [up, down] = path.relay->first_connection();
    namespace keys = bmi::support::keys;
    namespace tcp = bmi::method::tcp;
    const auto le = [](const std::uint8_t* p, int n) {
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
        return v;
    };
    // What the recording shows: the client's HELLO and HELLO_PROOF, the server's HELLO_ACK,
    // each a 24-byte header with the body's size at 16, then the client's first record.
    REQUIRE(up.size() > 24);
    const std::size_t hello_size = 24 + le(up.data() + 16, 8);
    REQUIRE(up.size() > hello_size + 24);
    const auto hello = tcp::decode_hello_body({up.data() + 24, hello_size - 24});
    const std::size_t proof_size = le(up.data() + hello_size + 16, 8);
    REQUIRE(proof_size == keys::proof_size);
    const std::uint8_t* initiator_proof = up.data() + hello_size + 24;
    const std::uint8_t* record = initiator_proof + proof_size;
    REQUIRE(down.size() > 24);
    const auto ack = tcp::decode_hello_body({down.data() + 24, le(down.data() + 16, 8)});
    REQUIRE(hello);
    REQUIRE(ack);
    REQUIRE(ack->proof);
    REQUIRE(ack->ciphers != 0);
    const std::size_t length = le(record, 4);
    REQUIRE(length > 0);
    REQUIRE(record + 4 + length + keys::record_tag_size <= up.data() + up.size());

    // The attacker holds the pre-shared key (the key file: 64 hex 'a's) and all of the above:
    // both proofs, which are the transcript the traffic keys mix in, and both public keys.
    std::array<std::uint8_t, keys::key_size> psk_bytes;
    psk_bytes.fill(0xaa);
    auto psk = keys::SecretKey::from_bytes(psk_bytes);
    REQUIRE(psk);
    std::array<std::uint8_t, 2 * keys::proof_size> transcript;
    std::copy(ack->proof->begin(), ack->proof->end(), transcript.begin());
    std::copy(initiator_proof, initiator_proof + keys::proof_size,
              transcript.begin() + keys::proof_size);
    const auto cipher = static_cast<keys::Cipher>(std::countr_zero(ack->ciphers));
    // Without either ephemeral secret the shared secret is a guess: nothing, either public
    // key, or an exchange the attacker can compute (the psk as a scalar on either public key).
    std::vector<keys::SharedSecret> guesses(1);
    guesses.push_back({});
    std::copy(hello->public_key.begin(), hello->public_key.end(), guesses.back().begin());
    guesses.push_back({});
    std::copy(ack->public_key.begin(), ack->public_key.end(), guesses.back().begin());
    for (const auto* theirs : {&hello->public_key, &ack->public_key}) {
        keys::SharedSecret s{};
        if (crypto_scalarmult(s.data(), psk_bytes.data(), theirs->data()) == 0)
            guesses.push_back(s);
    }
    for (const auto& guess : guesses) {
        const keys::TrafficKeys k = keys::derive_traffic_keys(*psk, transcript, guess, cipher);
        keys::RecordCipher opener(cipher, k.initiator_to_acceptor, keys::default_rekey_interval);
        std::vector<std::uint8_t> data(record + 4, record + 4 + length);
        CHECK_FALSE(opener.open({record, 4}, data,
                                std::span<const std::uint8_t, keys::record_tag_size>(
                                    record + 4 + length, keys::record_tag_size)));
    }
}

// A keyed client's first message through a relay that changes its HELLO as `tamper` says:
// the handshake fails, so nothing arrives and the send fails. Returns what the relay recorded.
std::vector<std::uint8_t> refused_through(const NetNamespaces& ns, Relay::Tamper tamper,
                                          const std::string& policy) {
    NetNamespaces::enter(ns.far);
    KeyDir k;
    auto server = start_server(opts(k, policy));
    Relay relay(ns, port_of(server->listen_address()), tamper);
    CClient client(opts(k, policy), relay.address());
    REQUIRE(client.lookup == 0);
    const auto msg = pattern(4096, 9);
    Op sent = c_send_unexpected(client, msg);
    CHECK_FALSE(await_unexpected(*server, &client, &sent));
    REQUIRE(drive([&] { c_poll(client, sent); }, {&sent}));
    CHECK(relay.stripped());
    CHECK(sent.error != 0);
    return relay.recording();
}

TEST_CASE("a stripped cipher offer is refused under require and fails the proof under prefer",
          "[netns]") {
    NetNamespaces ns;
    if (!ns.ok) {
        WARN("no network namespaces here (not root?): the relay cannot stand in the path");
        return;
    }
    for (const std::string policy : {"require", "prefer"}) {
        CAPTURE(policy);
        CHECK_FALSE(contains_marker(refused_through(ns, Relay::Tamper::strip_offer, policy)));
    }
}

TEST_CASE("hello features changed on the path fail the proof", "[netns]") {
    NetNamespaces ns;
    if (!ns.ok) {
        WARN("no network namespaces here (not root?): the relay cannot stand in the path");
        return;
    }
    // The server would take the client for one that takes 1 byte, or (bit 3 stripped) send it
    // only small EAGER frames: both proofs bind both features words, so neither end believes
    // the other.
    for (const auto tamper : {Relay::Tamper::change_limit, Relay::Tamper::strip_large_eager}) {
        CAPTURE(static_cast<int>(tamper));
        refused_through(ns, tamper, "require");
    }
}

TEST_CASE("a tiny rekey interval: 16 MiB cross many keys intact", "[netns]") {
    RelayedPair path("encryption=require,encryption_rekey_records=3", Relay::Tamper::none);
    if (!path.ready) return;
    auto& server = path.server;
    auto& sctx = path.sctx;
    CClient& client = *path.client;
    const auto hello = path.introduce(pattern(64, 10));
    bmi_op_id_t id = 0;
    const auto big = pattern(16 << 20, 11);
    std::vector<std::byte> into(big.size());
    Op recv = s_posted(server->post_recv(*sctx, hello.from(), into, 2));
    Op send = c_posted(BMI_post_send(&id, client.server, big.data(), big.size(), BMI_EXT_ALLOC, 2,
                                     nullptr, client.ctx, 0),
                       id, big.size());
    REQUIRE(drive(
        [&] {
            c_poll(client, send);
            s_poll(*server, *sctx, recv);
        },
        {&send, &recv}));
    CHECK(send.error == 0);
    CHECK(recv.error == 0);
    CHECK(same(into, big));
    CHECK_FALSE(contains_marker(path.relay->recording()));
}

// A server and a client session on one connection under `policy`, through its first
// (unexpected) message; no peer's stall clock runs out while a test keeps one side idle.
namespace {
struct IdlePair {
    KeyDir k;
    std::unique_ptr<bmi::Session> server;
    std::optional<bmi::Context> sctx;
    std::unique_ptr<bmi::Session> client;
    std::optional<bmi::Context> cctx;
    std::optional<bmi::Address> to;
    std::optional<bmi::UnexpectedMessage> got;  // the first message: got->from() is the client

    explicit IdlePair(const std::string& policy) {
        const std::string o = opts(k, policy, "tcp_stall_timeout_ms=60000");
        server = start_server(o);
        auto sc = server->open_context();
        REQUIRE(sc);
        sctx.emplace(std::move(*sc));
        auto c = bmi::Session::create({"bmi_tcp", "", 0, o});
        REQUIRE(c);
        client = std::move(*c);
        auto cc = client->open_context();
        REQUIRE(cc);
        cctx.emplace(std::move(*cc));
        auto a = client->lookup(server->listen_address());
        REQUIRE(a);
        to.emplace(std::move(*a));
        const auto hello = pattern(64, 14);
        Op first = s_posted(client->post_send_unexpected(*cctx, *to, hello, 1));
        for (int i = 0; i < 3000 && !got; ++i) {
            s_poll(*client, *cctx, first);
            auto r = server->test_unexpected(1, 5ms);
            REQUIRE(r);
            if (!r->empty()) got = std::move(r->front());
        }
        REQUIRE(got);
        REQUIRE(drive([&] { s_poll(*client, *cctx, first); }, {&first}));
    }

    // The sender is left alone from here on: the server alone runs (5 s at most) and every
    // message whose send completed arrives, `each` bytes each, `received` of them already.
    void check_arrived(std::size_t sent, std::size_t received, const std::vector<std::byte>& data,
                       const std::vector<std::byte>& into, std::size_t each) {
        std::array<bmi::Completion, 64> done;
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (received < sent && std::chrono::steady_clock::now() < deadline) {
            auto n = server->test_context(*sctx, done, 1ms);
            REQUIRE(n);
            for (std::size_t i = 0; i < *n; ++i) CHECK_FALSE(done[i].error);
            received += *n;
        }
        CAPTURE(sent);
        CHECK(received >= sent);
        CHECK(std::equal(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(sent * each),
                         into.begin()));
    }
};
}  // namespace

// A send completes only once the socket has taken all its records: a caller whose send is done
// need not call into BMI again for its bytes to reach the peer. The receiver stays idle until
// the sender's socket is full, so the last sends to complete had records left over.
TEST_CASE("a completed encrypted send needs no further progress call to arrive") {
    IdlePair p("require");

    // Eager messages, far more than the sockets hold.
    constexpr std::size_t count = 1024, each = 32 << 10;
    const auto data = pattern(count * each, 15);
    std::vector<std::byte> into(data.size());
    const std::span<const std::byte> out_all(data);
    const std::span<std::byte> in_all(into);
    std::size_t sent = 0, received = 0;
    for (std::size_t i = 0; i < count; ++i) {
        auto r = p.server->post_recv(*p.sctx, p.got->from(), in_all.subspan(i * each, each), 2);
        REQUIRE(r);
        received += r->immediate ? 1 : 0;
    }
    for (std::size_t i = 0; i < count; ++i) {
        auto s = p.client->post_send(*p.cctx, *p.to, out_all.subspan(i * each, each), 2);
        REQUIRE(s);
        sent += s->immediate ? 1 : 0;
    }
    // Only the sender runs, until no send completes for a while: its socket is full.
    std::array<bmi::Completion, 64> done;
    auto last = std::chrono::steady_clock::now();
    const auto limit = last + 30s;
    while (std::chrono::steady_clock::now() - last < 300ms &&
           std::chrono::steady_clock::now() < limit) {
        auto n = p.client->test_context(*p.cctx, done, 1ms);
        REQUIRE(n);
        for (std::size_t i = 0; i < *n; ++i) CHECK_FALSE(done[i].error);
        if (*n > 0) last = std::chrono::steady_clock::now();
        sent += *n;
    }
    REQUIRE(sent > 0);
    REQUIRE(sent < count);
    p.check_arrived(sent, received, data, into, each);
}

// The same for a small send that leaves at post (Method::send_now): the one that meets the full
// socket is not complete while part of it waits with the sender. Each send has a progress call
// before it, so send_now is tried for every one; the receiver stays idle until a send does not
// complete at post, and the sender stays idle from then on.
TEST_CASE("a small send completed at post needs no further progress call to arrive") {
    const std::string policy = GENERATE(std::string("require"), std::string("off"));
    CAPTURE(policy);
    IdlePair p(policy);

    // An odd size, so that the socket fills in the middle of one.
    constexpr std::size_t count = 16384, each = 3001;
    const auto data = pattern(count * each, 17);
    std::vector<std::byte> into(data.size());
    const std::span<const std::byte> out_all(data);
    const std::span<std::byte> in_all(into);
    std::size_t received = 0;
    for (std::size_t i = 0; i < count; ++i) {
        auto r = p.server->post_recv(*p.sctx, p.got->from(), in_all.subspan(i * each, each), 2);
        REQUIRE(r);
        received += r->immediate ? 1 : 0;
    }
    std::array<bmi::Completion, 64> done;
    std::size_t sent = 0;
    for (; sent < count; ++sent) {
        auto n = p.client->test_context(*p.cctx, done, 0ms);  // a progress pass
        REQUIRE(n);
        REQUIRE(*n == 0);
        auto s = p.client->post_send(*p.cctx, *p.to, out_all.subspan(sent * each, each), 2);
        REQUIRE(s);
        if (!s->immediate) break;
    }
    REQUIRE(sent < count);  // the socket filled
    p.check_arrived(sent, received, data, into, each);
}

TEST_CASE("require refuses a keyless peer and a legacy-framed one") {
    KeyDir k;
    auto server = start_server(opts(k, "require"));
    for (const std::string client_options : {"", "tcp_legacy_framing=orangefs"}) {
        CAPTURE(client_options);
        CClient client(client_options, server->listen_address());
        REQUIRE(client.lookup == 0);
        const auto msg = pattern(256, 12);
        Op sent = c_send_unexpected(client, msg);
        CHECK_FALSE(await_unexpected(*server, &client, &sent, 400));
    }
}

TEST_CASE("prefer or require without a key is an initialize error") {
    for (const std::string policy : {"prefer", "require"}) {
        auto r = bmi::Session::create({"bmi_tcp", "", 0, "encryption=" + policy});
        CHECK_FALSE(r);
    }
    CHECK(bmi::Session::create({"bmi_tcp", "", 0, "encryption=off"}));
}

// A free tcp port of 127.0.0.1, for an allocation's ports= field.
std::uint16_t free_port() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE((bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
             getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0));
    close(s);
    return ntohs(a.sin_port);
}

// BMI_ALLOCATION for the scope of one instance's creation.
struct ScopedAllocation {
    explicit ScopedAllocation(const std::string& text) {
        setenv("BMI_ALLOCATION", text.c_str(), 1);
    }
    ~ScopedAllocation() { unsetenv("BMI_ALLOCATION"); }
};

TEST_CASE("an allocation's encryption is a floor that a setting cannot lower") {
    KeyDir k;
    const std::string entry = "id=bmi.enc type=tcp plane=127.0.0.0/8 endpts=1 ports=" +
                              std::to_string(free_port()) + " key_file=" + k.key;
    {
        // The allocation's key is the key; without one its policy is an initialize error.
        ScopedAllocation none("id=bmi.enc type=tcp plane=127.0.0.0/8 endpts=1 ports=" +
                              std::to_string(free_port()) + " encryption=require");
        CHECK_FALSE(bmi::Session::create({"bmi_tcp", "", BMI_INIT_SERVER, ""}));
    }
    std::unique_ptr<bmi::Session> server;
    {
        ScopedAllocation with(entry + " encryption=require");
        auto r = bmi::Session::create({"bmi_tcp", "", BMI_INIT_SERVER, "encryption=off"});
        REQUIRE(r);
        server = std::move(*r);
    }
    const auto msg = pattern(256, 14);
    // Whether a client of this policy gets one message through.
    auto served = [&](const std::string& policy, bmi_msg_tag_t tag, int rounds) {
        CClient client(opts(k, policy), server->listen_address());
        REQUIRE(client.lookup == 0);
        bmi_op_id_t id = 0;
        Op sent = c_posted(BMI_post_sendunexpected(&id, client.server, msg.data(), msg.size(),
                                                   BMI_EXT_ALLOC, tag, nullptr, client.ctx, 0),
                           id, msg.size());
        auto got = await_unexpected(*server, &client, &sent, rounds);
        return got && got->tag() == tag;
    };
    // A keyed client that does not encrypt is refused by the allocation's require; one that
    // prefers encryption is served.
    CHECK_FALSE(served("off", 1, 400));
    CHECK(served("prefer", 2, 3000));
    // Entries of one instance state one policy.
    ScopedAllocation split(entry + " encryption=require; id=bmi.enc2 type=shm plane=" +
                           "node endpts=1 key_file=" + k.key + " encryption=prefer");
    CHECK_FALSE(bmi::Session::create({"bmi_tcp", "", 0, ""}));
}

#if BMI_TEST_VERBS
TEST_CASE("verbs starts under require and prefer: it encrypts too") {
    KeyDir k;
    // Started, or failed for want of a device (-BMI_ENODEV here), never refused for the policy
    // (doc/security.md, "verbs"); the suite `verbs` runs it encrypted in the guest.
    for (const char* policy : {"require", "prefer"}) {
        INFO("encryption=" << policy);
        auto r = bmi::Session::create(
            {"bmi_verbs", "verbs://127.0.0.1:0", BMI_INIT_SERVER, opts(k, policy)});
        CHECK((r || r.error() != bmi::error_from_code(-BMI_ENOSYS)));
    }
}
#endif
