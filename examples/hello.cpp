// SPDX-License-Identifier: LGPL-2.1-or-later
// The request/response idea of pvfs_server.c and pvfs_client.c with the C++ API: RAII owners,
// Result<T> instead of return codes, no global state.
//
//   hello server [LISTEN_ADDR]      prints "ADDR <address>", answers until a client says "bye"
//   hello client ADDR [COUNT]       sends COUNT greetings, checks each answer, then says "bye"
// The method comes from the address (tcp://, shm://, verbs://). A failure says what was being
// done, to which address, the error's name and meaning, and a hint (example_report.h).
#include <bmi/bmi.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "example_report.h"

using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_message = 256;
constexpr int wait_ms = 10000;  // the bound on every wait for one operation

// Examples stop at the first error; main() reports it and RAII releases everything.
struct Failure : std::runtime_error {
    Failure(std::string doing, std::string address, std::error_code code,
            int expired_after_ms = EXAMPLE_FROM_LIBRARY)
        : std::runtime_error(doing),
          address(std::move(address)),
          code(code),
          expired_after_ms(expired_after_ms) {}
    std::string address;  // empty when the failure concerns no peer
    std::error_code code;
    int expired_after_ms;  // this program's own bound when that passed, else from libbmi
};

template <class T>
T must(bmi::Result<T> result, const char* doing, const std::string& address = {}) {
    if (!result) throw Failure(doing, address, result.error());
    return std::move(result.value());
}

// "bmi_tcp" for "tcp://host:port", "bmi_ofi" for "ofi+tcp://host:port" (tcp is ofi's
// provider): the one method an address needs.
std::string method_of(const std::string& address) {
    const auto scheme = address.find("://");
    if (scheme == std::string::npos) return "bmi_tcp";  // the lookup then says what is wrong
    return "bmi_" + address.substr(0, std::min(scheme, address.find('+')));
}

std::span<const std::byte> bytes_of(std::string_view text) {
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

std::string answer_to(std::string_view question) {
    std::string answer(question);
    std::transform(answer.begin(), answer.end(), answer.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return answer;
}

// Waits for one operation unless the post already finished it; returns its completion.
bmi::Completion finish(bmi::Session& session, bmi::Context& ctx, const bmi::Posted& posted,
                       const char* doing, const std::string& address) {
    if (posted.immediate) return bmi::Completion{0, {}, posted.actual_size, nullptr};
    for (int waited_ms = 0; waited_ms < wait_ms; waited_ms += 100) {
        if (auto done = must(session.test(ctx, posted.id, 100ms), doing, address)) {
            if (done->error) throw Failure(doing, address, done->error);
            return *done;
        }
    }
    throw Failure(doing, address, make_error_code(bmi::errc::timed_out), wait_ms);
}

int run_server(const std::string& listen) {
    auto session = must(bmi::Session::create({method_of(listen), listen, BMI_INIT_SERVER, ""}),
                        "listening on", listen);
    auto ctx = must(session->open_context(), "open_context");
    std::printf("ADDR %s\n", session->listen_address().c_str());
    std::fflush(stdout);

    // Answers stay alive until their send completes; the user pointer finds them again.
    std::list<std::string> in_flight;
    bool bye = false;
    while (!bye || !in_flight.empty()) {
        for (auto& msg : must(session->test_unexpected(8, in_flight.empty() ? 100ms : 0ms),
                              "test_unexpected")) {
            if (msg.error()) throw std::runtime_error("unexpected: " + msg.error().message());
            std::string_view question(reinterpret_cast<const char*>(msg.data().data()),
                                      msg.data().size());
            bye = bye || question == "bye";
            auto& answer = in_flight.emplace_back(answer_to(question));
            auto posted =
                must(session->post_send(ctx, msg.from(), bytes_of(answer), msg.tag(), &answer),
                     "post_send");
            if (posted.immediate) in_flight.pop_back();
        }  // each UnexpectedMessage frees its buffer here
        bmi::Completion done[8];
        auto n =
            must(session->test_context(ctx, done, in_flight.empty() ? 0ms : 10ms), "test_context");
        for (std::size_t i = 0; i < n; ++i) {
            if (done[i].error)  // that client's loss only: the server goes on
                example_report("hello", "answering a client", nullptr, -done[i].error.value(),
                               EXAMPLE_FROM_LIBRARY);
            in_flight.remove_if([&](const std::string& s) { return &s == done[i].user_ptr; });
        }
    }
    std::printf("DONE\n");
    return 0;
}

int run_client(const std::string& server_addr, int count) {
    auto session = must(bmi::Session::create({method_of(server_addr), "", 0, ""}),
                        "starting the method of", server_addr);
    auto ctx = must(session->open_context(), "open_context");
    auto server = must(session->lookup(server_addr), "looking up", server_addr);
    auto reply = must(session->allocate(server, max_message), "allocate");

    for (int i = 0; i <= count; ++i) {
        std::string question = i < count ? "hello " + std::to_string(i) : "bye";
        // As in PVFS: the receive for the answer is posted before the request leaves.
        auto recv = must(session->post_recv(ctx, server, reply.bytes(), i),
                         "posting the receive of an answer from", server_addr);
        auto send = must(session->post_send_unexpected(ctx, server, bytes_of(question), i),
                         "sending a greeting to", server_addr);
        finish(*session, ctx, send, "sending a greeting to", server_addr);
        auto got = finish(*session, ctx, recv, "waiting for the answer of", server_addr);
        std::string_view answer(reinterpret_cast<const char*>(reply.bytes().data()),
                                static_cast<std::size_t>(got.actual_size));
        if (answer != answer_to(question))
            throw std::runtime_error("wrong answer to '" + question + "': '" + std::string(answer) +
                                     "'");
    }
    std::printf("OK %d greetings answered\n", count);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string_view mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "server") return run_server(argc > 2 ? argv[2] : "tcp://127.0.0.1:0");
        if (mode == "client" && argc > 2)
            return run_client(argv[2], argc > 3 ? std::stoi(argv[3]) : 10);
    } catch (const Failure& f) {
        example_report("hello", f.what(), f.address.empty() ? nullptr : f.address.c_str(),
                       -f.code.value(), f.expired_after_ms);
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hello: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: %s server [LISTEN_ADDR] | client ADDR [COUNT]\n", argv[0]);
    return 2;
}
