// SPDX-License-Identifier: LGPL-2.1-or-later
// A client that meets a full listen backlog: a nonblocking connect() to a Unix stream socket
// whose backlog is full fails with EAGAIN and starts nothing, so the method has to try again
// itself (1,000 clients starting at once against one server do exactly this). The server is a
// real shm instance that nobody progresses (its accept stalls); raw sockets fill its backlog
// first, so the kernel is seen answering EAGAIN before the client tries.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "hostile_peer.hpp"
#include "process_census.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
using Clock = std::chrono::steady_clock;

// Raw connections that fill the backlog of shm listener `name` until the kernel refuses one
// with EAGAIN. Closing them does not empty the backlog: only the listener's accept does.
class FilledBacklog {
public:
    explicit FilledBacklog(const std::string& name) : name_(name) {
        // The method listens with a backlog of 128; 1024 tries leave room for a larger one.
        for (int i = 0; i < 1024 && !refused_; ++i) {
            int s = -1;
            if (!try_connect(s)) break;
            if (s >= 0) sockets_.push_back(s);
        }
    }
    ~FilledBacklog() { close_all(); }
    FilledBacklog(const FilledBacklog&) = delete;
    FilledBacklog& operator=(const FilledBacklog&) = delete;

    bool kernel_said_eagain() const { return refused_; }
    std::size_t queued() const { return sockets_.size(); }
    // One more raw connect: true if the kernel still answers EAGAIN (nothing was accepted).
    bool still_full() {
        int s = -1;
        bool ok = try_connect(s);
        if (s >= 0) sockets_.push_back(s);
        return ok && s < 0;
    }
    void close_all() {
        for (int s : sockets_) close(s);
        sockets_.clear();
    }

private:
    // True unless something other than success or EAGAIN happened; s >= 0 when connected.
    bool try_connect(int& s) {
        std::string path = abstract_socket_name(name_);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path, path.data(), path.size());
        auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0) return false;
        if (connect(s, reinterpret_cast<sockaddr*>(&address), length) == 0) return true;
        int error = errno;
        close(s);
        s = -1;
        if (error == EAGAIN) refused_ = true;
        return error == EAGAIN;
    }

    std::string name_;
    std::vector<int> sockets_;
    bool refused_ = false;
};

std::string listen_name(Pair& pair) {
    std::string address = pair.server.instance->listen_addresses();
    REQUIRE(address.rfind("shm://", 0) == 0);
    return address.substr(6);
}

core::PostRequest unexpected_send(Pair& pair, const void* data, bmi_size_t size,
                                  bmi_msg_tag_t tag) {
    auto request = unexpected_request(pair.client, pair.server_addr, data, size, tag);
    return request;
}

// Progresses the client for `ms` with the send `id` pending; false if it completed meanwhile.
bool client_still_waits(Pair& pair, bmi_op_id_t id, int ms) {
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < until) {
        int done = 0;
        core::Completion c;
        REQUIRE(pair.client.instance->test(id, pair.client.context, 10, done, c) == 0);
        if (done == 1) return false;
    }
    return true;
}
}  // namespace

TEST_CASE("a connect that meets a full backlog is retried, and what was posted goes out once "
          "the listener accepts") {
    Pair pair = make_peers("shm");
    FilledBacklog backlog(listen_name(pair));
    REQUIRE(backlog.kernel_said_eagain());
    INFO("raw connections queued before EAGAIN: " << backlog.queued());

    std::vector<char> first(100), second(3000);
    fill_pattern(first.data(), first.size(), 1);
    fill_pattern(second.data(), second.size(), 2);
    bmi_op_id_t ids[2] = {};
    // Nobody accepted us yet, so the sends wait (0): a send that completed now would be lost
    // if the deadline passed before the listener accepted.
    int rcs[2] = {
        pair.client.instance->post(unexpected_send(pair, first.data(), 100, 1), ids[0], nullptr),
        pair.client.instance->post(unexpected_send(pair, second.data(), 3000, 2), ids[1], nullptr)};
    CHECK(rcs[0] == 0);
    CHECK(rcs[1] == 0);
    for (int i = 0; i < 2; ++i)
        if (rcs[i] != 0) ids[i] = 0;  // completed (or failed) at once: nothing to test
    // The client retries meanwhile, and the backlog is still full (its retries met EAGAIN).
    if (ids[0] != 0) CHECK(client_still_waits(pair, ids[0], 100));
    REQUIRE(backlog.still_full());

    // The server accepts from now on (the raw sockets hang up, it closes them).
    backlog.close_all();
    std::vector<core::UnexpectedMessage> got;
    int sends_done = (ids[0] == 0) + (ids[1] == 0);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (got.size() < 2 || sends_done < 2) {
        REQUIRE(Clock::now() < deadline);
        for (auto& id : ids) {
            if (id == 0) continue;
            int done = 0;
            core::Completion c;
            REQUIRE(pair.client.instance->test(id, pair.client.context, 0, done, c) == 0);
            if (done == 1) {
                REQUIRE(c.error == 0);
                id = 0;
                ++sends_done;
            }
        }
        core::UnexpectedMessage m[2];
        int outcount = 0;
        REQUIRE(pair.server.instance->testunexpected(10, outcount, m) == 0);
        got.insert(got.end(), m, m + outcount);
    }
    REQUIRE(got.size() == 2);
    CHECK(got[0].error == 0);
    CHECK(got[0].tag == 1);
    CHECK(got[0].size == 100);
    CHECK(check_pattern(got[0].buffer, 100, 1));
    CHECK(got[1].error == 0);
    CHECK(got[1].tag == 2);
    CHECK(got[1].size == 3000);
    CHECK(check_pattern(got[1].buffer, 3000, 2));
    for (auto& m : got) REQUIRE(pair.server.instance->unexpected_free(m.buffer) == 0);
}

TEST_CASE("a backlog that never drains fails the peer's operations with -BMI_ETIMEDOUT by the "
          "connect deadline, and leaves nothing behind") {
    Pair pair = make_peers("shm", "", "shm_setup_timeout_ms=300");  // the client's
    const std::size_t descriptors = open_descriptors();
    FilledBacklog backlog(listen_name(pair));
    REQUIRE(backlog.kernel_said_eagain());

    const char payload[] = "never delivered";
    char in[64];
    bmi_op_id_t send_id = 0, recv_id = 0;
    auto start = Clock::now();
    // 0: waits for the connect. 1 would claim a delivery nobody can make.
    REQUIRE(pair.client.instance->post(unexpected_send(pair, payload, sizeof payload, 5), send_id,
                                       nullptr) == 0);
    REQUIRE(
        pair.client.instance->post(recv_request(pair.client, pair.server_addr, in, sizeof in, 6),
                                   recv_id, nullptr) == 0);
    core::Completion sent = wait_op(pair.client, send_id, 5000);
    auto elapsed = Clock::now() - start;
    core::Completion received = wait_op(pair.client, recv_id, 1000);
    CHECK(sent.error == -BMI_ETIMEDOUT);
    CHECK(received.error == -BMI_ETIMEDOUT);
    CHECK(elapsed >= std::chrono::milliseconds(250));
    CHECK(elapsed < std::chrono::seconds(3));
    REQUIRE(backlog.still_full());  // the deadline passed, not the backlog
    backlog.close_all();
    CHECK(open_descriptors() == descriptors);

    // A later post starts a new attempt: once the server accepts, it gets through.
    int rc = pair.client.instance->post(unexpected_send(pair, payload, sizeof payload, 7), send_id,
                                        nullptr);
    REQUIRE(rc >= 0);
    core::UnexpectedMessage m[1];
    int outcount = 0;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (outcount == 0 || rc == 0) {
        REQUIRE(Clock::now() < deadline);
        int done = 0;
        core::Completion c;
        if (rc == 0) {
            REQUIRE(pair.client.instance->test(send_id, pair.client.context, 0, done, c) == 0);
            if (done == 1) {
                REQUIRE(c.error == 0);
                rc = 1;
            }
        }
        if (outcount == 0) REQUIRE(pair.server.instance->testunexpected(10, outcount, m) == 0);
    }
    CHECK(m[0].tag == 7);
    REQUIRE(pair.server.instance->unexpected_free(m[0].buffer) == 0);
}
