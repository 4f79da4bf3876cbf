// SPDX-License-Identifier: LGPL-2.1-or-later
// A libbmi client with the C++ API, built as an outside project would build it: as C++17 (g++'s
// default, where bmi::span is libbmi's stand-in) and as C++20 (where it is std::span). Sends
// "hello from C++NN" to ADDR as an unexpected message, checks the answer of hello_server.c and
// prints it as "REPLY <answer>".
#include <bmi/bmi.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

namespace {

int failed(const char* what, std::error_code error) {
    std::fprintf(stderr, "hello_client: %s: %s\n", what, error.message().c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace std::chrono_literals;
    if (argc != 2) {
        std::fprintf(stderr, "usage: hello_client ADDR\n");
        return 2;
    }
    auto session = bmi::Session::create({"bmi_tcp", "", 0, ""});
    if (!session) return failed("Session::create", session.error());
    auto& s = **session;
    auto peer = s.lookup(argv[1]);
    if (!peer) return failed("lookup", peer.error());
    auto ctx = s.open_context();
    if (!ctx) return failed("open_context", ctx.error());

    const std::string message = "hello from C++" + std::to_string(__cplusplus / 100 % 100);
    std::array<std::byte, 300> reply{};
    constexpr bmi_msg_tag_t tag = 7;
    auto recv = s.post_recv(*ctx, *peer, reply, tag);
    if (!recv) return failed("post_recv", recv.error());
    auto send = s.post_send_unexpected(
        *ctx, *peer, {reinterpret_cast<const std::byte*>(message.data()), message.size()}, tag);
    if (!send) return failed("post_send_unexpected", send.error());

    int pending = !recv->immediate + !send->immediate;
    bmi_size_t received = recv->immediate ? recv->actual_size : 0;
    for (int waited = 0; pending > 0 && waited < 100; ++waited) {
        std::array<bmi::Completion, 2> done;
        auto n = s.test_context(*ctx, done, 100ms);
        if (!n) return failed("test_context", n.error());
        for (std::size_t i = 0; i < *n; ++i) {
            if (done[i].error) return failed("completion", done[i].error);
            if (done[i].id == recv->id) received = done[i].actual_size;
        }
        pending -= static_cast<int>(*n);
    }
    if (pending > 0) return failed("waiting 10 s", make_error_code(bmi::errc::timed_out));

    const std::string answer(reinterpret_cast<const char*>(reply.data()),
                             static_cast<std::size_t>(received));
    std::printf("REPLY %s\n", answer.c_str());
    return answer == "echo: " + message ? 0 : 1;
}
