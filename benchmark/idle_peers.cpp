// SPDX-License-Identifier: LGPL-2.1-or-later
// idle_peers: holds COUNT idle clients of one BMI server, for the peers study (does a
// ping-pong with one client slow down as a server's other clients grow?). Each client is a
// Session of its own (a BMI instance), so the server sees COUNT distinct peers, each on its
// own connection. Every client sends one byte with a tag nobody receives: its connection is
// then established (handshake done) and the server holds that byte as early data, as a real
// server holds a quiet client. Prints "READY COUNT" once all sends completed, then stays until
// killed or until its standard input closes. The address's scheme picks the method (tcp://,
// shm:// or ofi...); an shm client's send completes before its handshake does, so shm clients are
// then progressed for a while until the hellos are answered and the replies read.
//
// usage: idle_peers --connect ADDR --count N [--timeout-ms MS]
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <bmi/bmi.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

// Far from the tags the ping-pong uses, so nothing there can match these bytes.
constexpr bmi_msg_tag_t idle_tag = 0x1d1e;

struct Client {
    std::unique_ptr<bmi::Session> session;
    bmi::Context context;
    bool done = false;
};

int fail(const std::string& what, std::error_code error) {
    std::fprintf(stderr, "idle_peers: %s: %s\n", what.c_str(), error.message().c_str());
    return 1;
}

// A server-like holder of thousands of sessions needs their descriptors: take the hard limit,
// as a server's start script would (ulimit -n).
void raise_descriptor_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

bool parse_count(const char* text, long max, long& out) {
    char* end = nullptr;
    out = std::strtol(text, &end, 10);
    return end != text && *end == '\0' && out >= 1 && out <= max;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace std::chrono;
    const char* address = nullptr;
    long count = 0, timeout_ms = 60000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--connect") == 0) {
            address = argv[i + 1];
        } else if (std::strcmp(argv[i], "--count") == 0) {
            if (!parse_count(argv[i + 1], 100000, count)) {
                std::fprintf(stderr, "idle_peers: --count %s: expected 1..100000\n", argv[i + 1]);
                return 2;
            }
        } else if (std::strcmp(argv[i], "--timeout-ms") == 0) {
            if (!parse_count(argv[i + 1], 3600000, timeout_ms)) {
                std::fprintf(stderr, "idle_peers: --timeout-ms %s: expected 1..3600000\n",
                             argv[i + 1]);
                return 2;
            }
        } else {
            std::fprintf(stderr, "idle_peers: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (address == nullptr || count == 0 || argc % 2 == 0) {
        std::fprintf(stderr, "usage: idle_peers --connect ADDR --count N [--timeout-ms MS]\n");
        return 2;
    }
    raise_descriptor_limit();

    const bool shm = std::strncmp(address, "shm://", 6) == 0;
    const bool ofi = std::strncmp(address, "ofi", 3) == 0;
    const char* method = shm ? "bmi_shm" : ofi ? "bmi_ofi" : "bmi_tcp";
    static const std::array<std::byte, 1> byte{std::byte{0x5a}};
    std::vector<Client> clients(static_cast<std::size_t>(count));
    long pending = 0;
    // One pass over the clients not yet connected; false on an error (printed).
    auto progress_pending = [&](std::size_t made) {
        for (std::size_t i = 0; i < made; ++i) {
            Client& c = clients[i];
            if (c.done) continue;
            std::array<bmi::Completion, 1> out;
            auto n = c.session->test_context(c.context, out, milliseconds(0));
            if (!n) {
                fail("test_context", n.error());
                return false;
            }
            if (*n == 0) continue;
            if (out[0].error) {
                fail("send", out[0].error);
                return false;
            }
            c.done = true;
            --pending;
        }
        return true;
    };
    for (std::size_t i = 0; i < clients.size(); ++i) {
        const std::string which = "client " + std::to_string(i);
        auto session = bmi::Session::create({method, "", 0, ""});
        if (!session) return fail(which + ": Session::create", session.error());
        Client& c = clients[i];
        c.session = std::move(*session);
        auto peer = c.session->lookup(address);
        if (!peer) return fail(which + ": lookup " + address, peer.error());
        auto context = c.session->open_context();
        if (!context) return fail(which + ": open_context", context.error());
        c.context = std::move(*context);
        auto sent = c.session->post_send(c.context, *peer, byte, idle_tag);
        if (!sent) return fail(which + ": post_send", sent.error());
        c.done = sent->immediate;
        pending += c.done ? 0 : 1;
        // An ofi client opens a fabric of its own (tens of ms): the first ones' handshakes
        // would pass their setup deadline before the last is made unless they move meanwhile.
        if (i % 16 == 15 && !progress_pending(i + 1)) return 1;
    }
    const auto deadline = steady_clock::now() + milliseconds(timeout_ms);
    while (pending > 0) {
        if (steady_clock::now() > deadline) {
            std::fprintf(stderr, "idle_peers: %ld of %ld clients not connected after %ld ms\n",
                         pending, count, timeout_ms);
            return 1;
        }
        if (!progress_pending(clients.size())) return 1;
    }
    // shm: a client whose connect waited in the listener's backlog sends its hello only when
    // it progresses, and each reads the reply (the server's doorbell) only then. So shm
    // clients are progressed for a while before READY (longer the more of them, up to a
    // second), and then every 200 ms while they idle (which costs the server nothing: they
    // send nothing).
    auto pump = [&]() -> int {
        for (Client& c : clients) {
            std::array<bmi::Completion, 1> out;
            auto n = c.session->test_context(c.context, out, milliseconds(0));
            if (!n) return fail("test_context", n.error());
        }
        return 0;
    };
    const long settle_ms = shm ? std::min(1000L, 200 + 2 * count) : 0;
    const auto settle = steady_clock::now() + milliseconds(settle_ms);
    while (steady_clock::now() < settle)
        if (pump() != 0) return 1;
    std::printf("READY %ld\n", count);
    std::fflush(stdout);
    // Idle: the sessions live until we are killed or our standard input closes.
    pollfd in{STDIN_FILENO, POLLIN, 0};
    char scratch[64];
    for (;;) {
        int ready = poll(&in, 1, shm ? 200 : -1);
        if (ready < 0 || (ready > 0 && read(STDIN_FILENO, scratch, sizeof scratch) <= 0)) break;
        if (shm && pump() != 0) return 1;
    }
    return 0;
}
