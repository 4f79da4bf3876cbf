// SPDX-License-Identifier: LGPL-2.1-or-later
// What a security key costs (issue 16, doc/PERFORMANCE.md): handshakes per second, a new
// client instance each time, and the one-way latency of 8-byte messages on an established
// connection, each with and without a key, and over tcp also with a key and encryption required
// (issue 39: records sealed after the keyed handshake), in rounds taken in turns within one run.
//
//   handshake_rate [--method tcp|shm] [--handshakes N] [--messages N] [--rounds N]
//
// A handshake is what a new PVFS client costs a server: an instance is created, looks the
// server up, and its first (unexpected) message is received by the server. The server runs
// in a thread of this process; the two share the machine's cores as two processes would.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bmi.h"
#include "bmi/bmi.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Plan {
    std::string method = "tcp";
    int handshakes = 500;
    int messages = 5000;
    int rounds = 3;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "handshake_rate: %s\n", what.c_str());
    std::exit(1);
}

template <class T>
T must(bmi::Result<T> r, const char* what) {
    if (!r) die(std::string(what) + ": " + r.error().message());
    return std::move(r.value());
}

bmi::Completion wait(bmi::Session& s, bmi::Context& ctx, const bmi::Posted& p) {
    if (p.immediate) return {};
    for (;;) {
        if (auto done = must(s.test(ctx, p.id, 1000ms), "test")) {
            if (done->error) die("operation failed: " + done->error.message());
            return *done;
        }
    }
}

// A server that echoes every unexpected message of tag 2 as an expected one (the ping-pong)
// and counts the others (handshakes), until stopped.
class Server {
public:
    Server(const std::string& method, const std::string& options) {
        const std::string listen = method == "tcp" ? "tcp://127.0.0.1:0"
                                                   : "shm://hs" + std::to_string(getpid()) + "-" +
                                                         std::to_string(options.size());
        session_ = must(bmi::Session::create({"bmi_" + method, listen, BMI_INIT_SERVER, options}),
                        "server");
        address_ = session_->listen_address();
        thread_ = std::thread([this] { run(); });
    }
    ~Server() {
        stop_ = true;
        thread_.join();
    }
    const std::string& address() const { return address_; }
    int received() const { return received_.load(); }

private:
    void run() {
        auto ctx = must(session_->open_context(), "server context");
        while (!stop_) {
            auto got = must(session_->test_unexpected(8, 20ms), "testunexpected");
            for (auto& m : got) {
                if (m.tag() == 2) {  // a ping: answer it
                    auto p = must(session_->post_send(ctx, m.from(), m.data(), 3), "pong");
                    wait(*session_, ctx, p);
                }
                received_++;
            }
        }
    }
    std::unique_ptr<bmi::Session> session_;
    std::string address_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<int> received_{0};
};

double handshakes_per_second(const Plan& plan, Server& server, const std::string& options) {
    const std::byte hello{1};
    const auto start = Clock::now();
    for (int i = 0; i < plan.handshakes; ++i) {
        const int before = server.received();
        auto client = must(bmi::Session::create({"bmi_" + plan.method, "", 0, options}), "client");
        auto ctx = must(client->open_context(), "context");
        auto to = must(client->lookup(server.address()), "lookup");
        auto p = must(client->post_send_unexpected(ctx, to, {&hello, 1}, 1), "send");
        wait(*client, ctx, p);
        while (server.received() == before) std::this_thread::yield();
    }
    return plan.handshakes / std::chrono::duration<double>(Clock::now() - start).count();
}

// One-way latency in microseconds: half the mean round trip of 8-byte pings.
double latency_us(const Plan& plan, Server& server, const std::string& options) {
    auto client = must(bmi::Session::create({"bmi_" + plan.method, "", 0, options}), "client");
    auto ctx = must(client->open_context(), "context");
    auto to = must(client->lookup(server.address()), "lookup");
    std::byte ping[8] = {}, pong[8] = {};
    auto round_trip = [&] {
        auto r = must(client->post_recv(ctx, to, pong, 3), "recv");
        auto s = must(client->post_send_unexpected(ctx, to, ping, 2), "ping");
        wait(*client, ctx, s);
        wait(*client, ctx, r);
    };
    for (int i = 0; i < 100; ++i) round_trip();  // connection up, caches warm
    const auto start = Clock::now();
    for (int i = 0; i < plan.messages; ++i) round_trip();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / plan.messages /
           2;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

Plan parse(int argc, char** argv) {
    Plan plan;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc)
            die("usage: handshake_rate [--method tcp|shm] [--handshakes N] "
                "[--messages N] [--rounds N]");
        const std::string v = argv[++i];
        if (a == "--method" && (v == "tcp" || v == "shm"))
            plan.method = v;
        else if (a == "--handshakes")
            plan.handshakes = std::max(1, std::atoi(v.c_str()));
        else if (a == "--messages")
            plan.messages = std::max(1, std::atoi(v.c_str()));
        else if (a == "--rounds")
            plan.rounds = std::max(1, std::atoi(v.c_str()));
        else
            die("bad argument " + a + " " + v);
    }
    return plan;
}
}  // namespace

int main(int argc, char** argv) {
    const Plan plan = parse(argc, argv);
    std::string dir = (std::filesystem::temp_directory_path() / "bmi-hs-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) die("mkdtemp failed");
    const std::string key = dir + "/key";
    std::ofstream(key) << std::string(64, 'c') << "\n";
    chmod(key.c_str(), 0600);
    // Encryption is a tcp setting: shm has no row for it.
    const std::vector<std::pair<std::string, std::string>> settings = [&] {
        std::vector<std::pair<std::string, std::string>> v = {{"none", ""},
                                                              {"key", "key_file=" + key}};
        if (plan.method == "tcp")
            v.emplace_back("encrypted", "key_file=" + key + ",encryption=require");
        return v;
    }();
    std::vector<std::vector<double>> rate(settings.size()), lat(settings.size());
    {
        std::vector<std::unique_ptr<Server>> servers;
        for (const auto& [name, options] : settings)
            servers.push_back(std::make_unique<Server>(plan.method, options));
        for (int r = 0; r < plan.rounds; ++r) {  // in turns, so drift hits all alike
            for (std::size_t i = 0; i < settings.size(); ++i)
                rate[i].push_back(handshakes_per_second(plan, *servers[i], settings[i].second));
            for (std::size_t i = 0; i < settings.size(); ++i)
                lat[i].push_back(latency_us(plan, *servers[i], settings[i].second));
        }
    }
    std::filesystem::remove_all(dir);
    std::printf("# %s, medians of %d rounds taken in turns: %d handshakes, %d 8-byte round trips\n",
                plan.method.c_str(), plan.rounds, plan.handshakes, plan.messages);
    std::printf("%-10s %14s %12s\n", "# key", "handshakes/s", "latency_us");
    for (std::size_t i = 0; i < settings.size(); ++i)
        std::printf("%-10s %14.0f %12.2f\n", settings[i].first.c_str(), median(rate[i]),
                    median(lat[i]));
    for (std::size_t i = 1; i < settings.size(); ++i)
        std::printf("# %s/none: handshakes %.2fx, latency %.2fx\n", settings[i].first.c_str(),
                    median(rate[i]) / median(rate[0]), median(lat[i]) / median(lat[0]));
    return 0;
}
