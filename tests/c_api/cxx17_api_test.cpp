// SPDX-License-Identifier: LGPL-2.1-or-later
// The C++ API as a C++17 program sees it (bmi/span.hpp's stand-in, the inline span wrappers of
// bmi.hpp): built with cpp_std=c++17, it sends one message between two sessions of this
// process over 127.0.0.1 and back, through every call that takes a span, then follows the
// client's address through hold/release until the client leaves.
#include <bmi/bmi.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

static_assert(__cplusplus < 202002L, "this test must be built as C++17");

namespace {

using namespace std::chrono_literals;

int failed(const char* what, std::error_code error = {}) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, error ? error.message().c_str() : "");
    return 1;
}

// Both sessions live on this thread, so each wait drives the two in turn. Collects what
// completes on ctx into done; false on an error.
bool poll(bmi::Session& s, bmi::Context& ctx, std::vector<bmi::Completion>& done) {
    std::array<bmi::Completion, 4> out;
    auto n = s.test_context(ctx, out, 10ms);
    if (!n) return false;
    done.insert(done.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
    return true;
}

}  // namespace

int main() {
    auto server = bmi::Session::create(
        {"bmi_tcp", "tcp://127.0.0.1:0", BMI_INIT_SERVER | BMI_AUTO_REF_COUNT, ""});
    auto client = bmi::Session::create({"bmi_tcp", "", 0, ""});
    if (!server || !client) return failed("Session::create");
    auto server_ctx = (*server)->open_context();
    auto client_ctx = (*client)->open_context();
    auto peer = (*client)->lookup((*server)->listen_address());
    if (!server_ctx || !client_ctx || !peer) return failed("open_context or lookup");

    const std::string question = "ping";
    std::vector<std::byte> answer(16);
    auto recv = (*client)->post_recv(*client_ctx, *peer, answer, 3);
    auto send = (*client)->post_send_unexpected(
        *client_ctx, *peer,
        bmi::span<const std::byte>(reinterpret_cast<const std::byte*>(question.data()),
                                   question.size()),
        3);
    if (!recv || !send) return failed("post", recv ? send.error() : recv.error());

    std::vector<bmi::Completion> client_done, server_done;
    std::vector<bmi::UnexpectedMessage> got;
    for (int i = 0; i < 500 && got.empty(); ++i) {
        auto msgs = (*server)->test_unexpected(1, 10ms);
        if (!msgs) return failed("test_unexpected", msgs.error());
        got = std::move(*msgs);
        if (!poll(**client, *client_ctx, client_done)) return failed("client test_context");
    }
    if (got.size() != 1 || got[0].data().size() != question.size()) return failed("no request");
    bmi::span<const std::byte> request = got[0].data();  // echo it back as it came
    auto reply = (*server)->post_send(*server_ctx, got[0].from(), request, got[0].tag());
    if (!reply) return failed("post_send", reply.error());

    // Until the client's receive (and with it, or before, its send) has completed.
    auto received = [&] {
        for (const auto& c : client_done)
            if (c.id == recv->id) return true;
        return recv->immediate;
    };
    for (int i = 0; i < 500 && !received(); ++i)
        if (!poll(**server, *server_ctx, server_done) || !poll(**client, *client_ctx, client_done))
            return failed("test_context");
    for (const auto& c : client_done)
        if (c.error) return failed("client completion", c.error);
    if (!received() ||
        std::string(reinterpret_cast<const char*>(answer.data()), question.size()) != question)
        return failed("no answer, or a wrong one");

    // The request held a reference to the client's address (BMI_AUTO_REF_COUNT); with it
    // given back, the address lives while the client does and goes when it leaves.
    const bmi::Address from = got[0].from();
    if ((*server)->address_count() != 1) return failed("address_count with one client");
    if (auto e = (*server)->hold(from)) return failed("hold", e);
    if (auto e = (*server)->release(from)) return failed("release (hold)", e);
    if (auto e = (*server)->release(from)) return failed("release (request)", e);
    if (!(*server)->release(from)) return failed("release below 0 was accepted");
    if ((*server)->address_count() != 1) return failed("a connected client's address went");
    { bmi::Context closing = std::move(*client_ctx); }  // a Context must not outlive its Session
    client->reset();
    for (int i = 0; i < 500 && (*server)->address_count() != 0; ++i)
        if (!poll(**server, *server_ctx, server_done)) return failed("server test_context");
    if ((*server)->address_count() != 0) return failed("the departed client's address stayed");
    if (!(*server)->rev_lookup(from).empty()) return failed("rev_lookup of a freed address");
    std::printf("C++17: ping answered, the client's address freed after it left\n");
    return 0;
}
