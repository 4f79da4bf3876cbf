// SPDX-License-Identifier: LGPL-2.1-or-later
// Sixteen threads on two instances at once, through every method (issue 19): senders and
// receivers share one context per side and collect completions for each other with
// testcontext, cancellers post receives nobody answers and cancel them on the same contexts,
// and address churners each look up an instance of their own, send to it and drop the address
// again (their own, so that no drop fails another thread's send by design). Every
// payload is checked. Run under ThreadSanitizer this is the race detector's workload; without
// it, a test that lost, duplicated or corrupted nothing under contention.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

using Clock = std::chrono::steady_clock;

// Completions of one shared context, whichever thread's testcontext found them.
class SharedContext {
public:
    SharedContext(core::Instance& instance, bmi_context_id context)
        : instance_(instance), context_(context) {}

    // The completion of id, or nullopt at the deadline.
    std::optional<core::Completion> wait(bmi_op_id_t id, Clock::time_point deadline) {
        while (Clock::now() < deadline) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                auto it = done_.find(id);
                if (it != done_.end()) {
                    core::Completion c = it->second;
                    done_.erase(it);
                    return c;
                }
            }
            core::Completion got[8];
            int outcount = 0;
            if (instance_.testcontext(context_, 5, outcount, got) != 0) return std::nullopt;
            std::lock_guard<std::mutex> lock(mutex_);
            for (int i = 0; i < outcount; ++i) {
                // An id completes once: a second completion of it is a defect.
                if (!done_.emplace(got[i].id, got[i]).second) ++duplicates_;
            }
        }
        return std::nullopt;
    }

    int duplicates() const { return duplicates_.load(); }
    std::size_t unclaimed() {
        std::lock_guard<std::mutex> lock(mutex_);
        return done_.size();
    }

private:
    core::Instance& instance_;
    bmi_context_id context_;
    std::mutex mutex_;
    std::map<bmi_op_id_t, core::Completion> done_;
    std::atomic<int> duplicates_{0};
};

constexpr int pairs = 5;       // sender (client) + receiver (server) threads each
constexpr int cancellers = 3;  // client threads
constexpr int churners = 3;    // client threads
constexpr int rounds = 40;
static_assert(2 * pairs + cancellers + churners == 16);

// Small messages go eagerly, every fourth one is large enough for the rendezvous path.
bmi_size_t size_of_round(int round) { return round % 4 == 3 ? 200 * 1024 : 64 + round * 8; }

// Posts and waits on a shared context; false (counted by the caller) on any failure.
bool post_wait(core::Instance& instance, SharedContext& shared, core::PostRequest request,
               bmi_context_id context, int expected_error, bmi_size_t* actual) {
    request.context = context;
    bmi_op_id_t id = 0;
    bmi_size_t immediate = 0;
    const int rc = instance.post(request, id, &immediate);
    if (rc == 1) {
        if (actual != nullptr) *actual = immediate;
        return expected_error == 0;
    }
    if (rc != 0) return false;
    auto c = shared.wait(id, Clock::now() + std::chrono::seconds(30));
    if (!c || c->error != expected_error) return false;
    if (actual != nullptr) *actual = c->actual_size;
    return true;
}

}  // namespace

TEST_CASE("16 threads post, test, cancel and drop addresses on shared contexts",
          "[conformance][threads]") {
    auto scheme = GENERATE(from_range(compiled_schemes()));
    Pair pair = make_peers(scheme);
    // others[i].server: the instance churner i visits (the pairs' clients stay idle).
    std::vector<Pair> others;
    for (int i = 0; i < churners; ++i) others.push_back(make_peers(scheme));
    BMI_addr_t client_addr = introduce(pair);
    // The visited instances take the churners' unexpected messages and let them go.
    std::atomic<bool> stop{false};
    std::atomic<int> visits{0};
    std::thread visited([&] {
        core::UnexpectedMessage got[4];
        while (!stop.load()) {
            for (Pair& other : others) {
                int outcount = 0;
                if (other.server.instance->testunexpected(1, outcount, got) != 0) return;
                for (int i = 0; i < outcount; ++i) {
                    other.server.instance->unexpected_free(got[i].buffer);
                    ++visits;
                }
            }
        }
    });

    SharedContext client_shared(*pair.client.instance, pair.client.context);
    SharedContext server_shared(*pair.server.instance, pair.server.context);
    std::atomic<int> failures{0}, corrupt{0}, cancelled{0}, dropped{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < pairs; ++t) {
        const bmi_msg_tag_t tag = 2000 + t;
        threads.emplace_back([&, t, tag] {  // sender
            std::vector<char> data;
            for (int r = 0; r < rounds; ++r) {
                data.resize(static_cast<std::size_t>(size_of_round(r)));
                fill_pattern(data.data(), data.size(), static_cast<std::uint32_t>(t * 1000 + r));
                auto req = send_request(pair.client, pair.server_addr, data.data(),
                                        static_cast<bmi_size_t>(data.size()), tag);
                if (!post_wait(*pair.client.instance, client_shared, req, pair.client.context, 0,
                               nullptr))
                    ++failures;
            }
        });
        threads.emplace_back([&, t, tag] {  // receiver
            std::vector<char> data;
            for (int r = 0; r < rounds; ++r) {
                const auto size = size_of_round(r);
                data.assign(static_cast<std::size_t>(size), 0);
                auto req = recv_request(pair.server, client_addr, data.data(), size, tag);
                bmi_size_t actual = -1;
                if (!post_wait(*pair.server.instance, server_shared, req, pair.server.context, 0,
                               &actual))
                    ++failures;
                else if (actual != size || !check_pattern(data.data(), data.size(),
                                                          static_cast<std::uint32_t>(t * 1000 + r)))
                    ++corrupt;
            }
        });
    }
    for (int t = 0; t < cancellers; ++t) {
        threads.emplace_back([&, t] {
            int buffer = 0;
            for (int r = 0; r < rounds; ++r) {
                // A tag nobody sends: only the cancel can end it.
                auto req =
                    recv_request(pair.client, pair.server_addr, &buffer, sizeof buffer, 3000 + t);
                req.context = pair.client.context;
                bmi_op_id_t id = 0;
                if (pair.client.instance->post(req, id, nullptr) != 0 ||
                    pair.client.instance->cancel(id, pair.client.context) != 0) {
                    ++failures;
                    continue;
                }
                auto c = client_shared.wait(id, Clock::now() + std::chrono::seconds(30));
                if (c && c->error == -BMI_ECANCEL)
                    ++cancelled;
                else
                    ++failures;
            }
        });
    }
    for (int t = 0; t < churners; ++t) {
        const std::string address = others[t].server.instance->listen_addresses();
        threads.emplace_back([&, t, address] {
            const char note[] = "visit";
            for (int r = 0; r < rounds / 4; ++r) {
                BMI_addr_t addr = 0;
                if (pair.client.instance->addr_lookup(address, addr) != 0) {
                    ++failures;
                    continue;
                }
                auto req = unexpected_request(pair.client, addr, note, sizeof note, 4000 + t);
                if (!post_wait(*pair.client.instance, client_shared, req, pair.client.context, 0,
                               nullptr))
                    ++failures;
                if (pair.client.instance->set_info(addr, BMI_DROP_ADDR, nullptr) == 0)
                    ++dropped;
                else
                    ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    // A send completes when its bytes are out, not when they have arrived: give the visited
    // instances a moment to take the last ones.
    const auto settle = Clock::now() + std::chrono::seconds(10);
    while (visits.load() < churners * (rounds / 4) && Clock::now() < settle)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    visited.join();

    INFO("scheme " << scheme);
    CHECK(failures.load() == 0);
    CHECK(corrupt.load() == 0);
    CHECK(cancelled.load() == cancellers * rounds);
    CHECK(dropped.load() == churners * (rounds / 4));
    CHECK(visits.load() == churners * (rounds / 4));
    CHECK(client_shared.duplicates() == 0);
    CHECK(server_shared.duplicates() == 0);
    CHECK(client_shared.unclaimed() == 0);
    CHECK(server_shared.unclaimed() == 0);
}
