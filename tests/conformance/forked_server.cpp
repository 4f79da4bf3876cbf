// SPDX-License-Identifier: LGPL-2.1-or-later
#include "forked_server.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <span>

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_shm.hpp"
#endif

namespace bmi::test {

using Clock = std::chrono::steady_clock;

namespace {
[[noreturn]] void serve_until_killed(int address_fd, const std::string& scheme,
                                     const std::string& options) {
    Side server;
    core::InitParams params;
    params.listen = test_listen_address(scheme);
    params.flags = BMI_INIT_SERVER;
    params.options = options;
    params.dialect = selected_dialect();
    if (core::Instance::create(params, server.instance) != 0 ||
        server.instance->open_context(server.context) != 0)
        std::_Exit(3);
    const std::string line = server.instance->listen_addresses() + "\n";
    if (write(address_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        std::_Exit(4);
    close(address_fd);
    for (;;) {
        int outcount = 0;
        core::UnexpectedMessage message;
        if (server.instance->testunexpected(10, outcount, std::span(&message, 1)) != 0)
            std::_Exit(5);
        if (outcount == 0) continue;
        bmi_op_id_t id = 0;
        bmi_size_t actual = 0;
        const auto answer =
            send_request(server, message.addr, message.buffer, message.size, message.tag);
        if (server.instance->post(answer, id, &actual) == 0) {
            core::Completion done[1];
            const auto until = Clock::now() + std::chrono::seconds(5);
            for (int got = 0; got == 0 && Clock::now() < until;)
                server.instance->testcontext(server.context, 10, got, done);
        }
        server.instance->unexpected_free(message.buffer);
    }
}

}  // namespace

void ForkedServer::kill_now() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
}

ForkedServer::~ForkedServer() {
    kill_now();
#if BMI_METHOD_OFI
    if (address.rfind("ofi+shm://", 0) == 0) {
        std::error_code ignored;
        std::filesystem::remove(method::ofi::shm_region_path(address), ignored);
    }
#endif
}

void fork_server(const std::string& scheme, const std::string& options, ForkedServer& server) {
    const ForkedChild forked = fork_with_pipe(true);
    if (forked.pid == 0) serve_until_killed(forked.fd, scheme, options);
    server.pid = forked.pid;
    server.address = read_line(forked.fd);
    close(forked.fd);
}

bool echoed(Side& client, BMI_addr_t server, const std::string& text, bmi_msg_tag_t tag, int ms) {
    char reply[64] = {};
    bmi_op_id_t recv_id = 0;
    bmi_size_t actual = 0;
    const int posted = client.instance->post(recv_request(client, server, reply, sizeof reply, tag),
                                             recv_id, &actual);
    REQUIRE(posted >= 0);
    auto request =
        unexpected_request(client, server, text.data(), static_cast<bmi_size_t>(text.size()), tag);
    if (post_and_wait(client, request, ms).error != 0) return false;
    const core::Completion done = posted == 1 ? core::Completion{0, 0, actual, nullptr}
                                              : wait_op(client, recv_id, ms);
    return done.error == 0 &&
           std::string(reply, static_cast<std::size_t>(done.actual_size)) == text;
}

bool ofi_over_shm() {
    const char* provider = std::getenv("BMI_CONFORMANCE_OFI_PROVIDER");
    return provider != nullptr && std::string(provider) == "shm";
}

bool runs_over_ofi_shm(const char* what) {
    if (!scheme_compiled("ofi")) return false;
    if (ofi_over_shm()) return true;
    WARN("SKIP: " << what << " is libfabric's shm's (BMI_CONFORMANCE_OFI_PROVIDER=shm)");
    return false;
}

}  // namespace bmi::test
