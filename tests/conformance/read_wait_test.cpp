// SPDX-License-Identifier: LGPL-2.1-or-later
// Conformance: a tcp client that sleeps in its socket's read (tcp_read_wait_us, taken while
// one thread uses the instance) holds a second thread back for that read's bound at most, and
// takes no such sleep once the second thread has shown up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
// Answers each request (tag `request`) from `from` with a reply (tag `request + 1`), until
// stopped. Its own waits are short, so it needs no pump; nothing here may REQUIRE.
class Echo {
public:
    Echo(Side& server, BMI_addr_t from, bmi_msg_tag_t request)
        : thread_([this, &server, from, request] { run(server, from, request); }) {}
    ~Echo() {
        stop_ = true;
        thread_.join();
    }
    Echo(const Echo&) = delete;
    Echo& operator=(const Echo&) = delete;

private:
    // Waits for id in short slices; false when stopped first or on an error.
    bool finish(Side& s, bmi_op_id_t id) {
        while (!stop_) {
            int outcount = 0;
            core::Completion c;
            if (s.instance->test(id, s.context, 20, outcount, c) != 0) return false;
            if (outcount == 1) return c.error == 0;
        }
        return false;
    }
    void run(Side& s, BMI_addr_t from, bmi_msg_tag_t request) {
        char in[8] = {}, out[8] = "pong";
        while (!stop_) {
            bmi_op_id_t id = 0;
            if (s.instance->post(recv_request(s, from, in, sizeof in, request), id, nullptr) < 0)
                return;
            if (id != 0 && !finish(s, id)) {
                if (id != 0) s.instance->cancel(id, s.context);
                return;
            }
            id = 0;
            if (s.instance->post(send_request(s, from, out, sizeof out, request + 1), id, nullptr) <
                0)
                return;
            if (id != 0 && !finish(s, id)) return;
        }
    }

    std::atomic<bool> stop_{false};
    std::thread thread_;
};
}  // namespace

TEST_CASE("a sleep in a socket read holds a second thread back for its bound at most",
          "[conformance][threads]") {
    const auto schemes = compiled_schemes();
    if (std::find(schemes.begin(), schemes.end(), "tcp") == schemes.end()) return;
    // One second: long enough that a post held by the read stands out from one that is not.
    Pair pair = make_peers("tcp", "tcp_read_wait_us=1000000");
    const BMI_addr_t client_addr = introduce(pair);
    Echo echo(pair.server, client_addr, 20);

    // Twice: the test thread waits for a reply that comes only after a second thread posted
    // the request. In the first round the test thread is the only one the instance has seen,
    // so it sleeps in the read and the second thread's post waits for that read to end. In
    // the second round the instance knows two threads: no read sleep holds the post.
    Clock::duration post_took[2]{};
    for (int round = 0; round < 2; ++round) {
        char in[8] = {}, out[8] = "ping";
        bmi_op_id_t rid = 0;
        REQUIRE(pair.client.instance->post(
                    recv_request(pair.client, pair.server_addr, in, sizeof in, 21), rid, nullptr) ==
                0);
        std::atomic<int> post_rc{1};
        std::thread requester([&] {
            std::this_thread::sleep_for(50ms);  // the test thread is asleep by now
            const auto start = Clock::now();
            bmi_op_id_t sid = 0;
            post_rc = pair.client.instance->post(
                send_request(pair.client, pair.server_addr, out, sizeof out, 20), sid, nullptr);
            post_took[round] = Clock::now() - start;
            if (post_rc == 0) {
                int outcount = 0;
                core::Completion c;
                for (int i = 0; i < 500 && outcount == 0; ++i)
                    pair.client.instance->test(sid, pair.client.context, 20, outcount, c);
                if (outcount == 0) post_rc = -1;
            }
        });
        const auto start = Clock::now();
        int outcount = 0;
        core::Completion c;
        REQUIRE(pair.client.instance->test(rid, pair.client.context, 20000, outcount, c) == 0);
        const auto waited = Clock::now() - start;
        requester.join();
        INFO("round " << round);
        REQUIRE(post_rc >= 0);
        REQUIRE(outcount == 1);
        CHECK(c.error == 0);
        // The reply ended the wait, not its 20 s cap: a read sleep ends at its bound.
        CHECK(waited < 5s);
    }
    // The first post waited for the read to end (1 s, rounded up to the kernel's tick); the
    // second one found no read sleep in its way.
    CHECK(post_took[0] >= 500ms);
    CHECK(post_took[0] < 5s);
    CHECK(post_took[1] < 500ms);
}
