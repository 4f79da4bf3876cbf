// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer that proved the key may be named by the listen address it announced (issue 16): the
// handshake's transcript binds that address, so when server B later looks up server A, it
// finds the connection A opened and answers over it. Without a key the announcement routes
// nothing (SPEC §6): the same lookup is a peer of its own. The rule is the same for tcp and shm.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bmi.h"
#include "bmi/bmi.hpp"

using namespace std::chrono_literals;

namespace {
std::unique_ptr<bmi::Session> server(const std::string& method, const std::string& options) {
    static int servers = 0;
    const std::string listen = method == "tcp" ? "tcp://127.0.0.1:0"
                                               : "shm://proven-" + std::to_string(getpid()) + "-" +
                                                     std::to_string(servers++);
    auto r = bmi::Session::create({"bmi_" + method, listen, BMI_INIT_SERVER, options});
    REQUIRE(r);
    return std::move(*r);
}

// Messages live as long as the test: BMI reads a send's buffer until it completes.
const std::string hello_text = "hello", answer_text = "answer";

std::span<const std::byte> bytes(const std::string& text) {
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

// a sends "hello" to b as an unexpected message; b's address for a, as b sees the sender.
bmi::Address introduce(bmi::Session& a, bmi::Session& b) {
    auto ctx = a.open_context();
    REQUIRE(ctx);
    auto to = a.lookup(b.listen_address());
    REQUIRE(to);
    auto sent = a.post_send_unexpected(*ctx, *to, bytes(hello_text), 1);
    REQUIRE(sent);
    for (int i = 0; i < 100; ++i) {
        if (!sent->immediate) (void)a.test(*ctx, sent->id, 0ms);
        auto got = b.test_unexpected(1, 50ms);
        REQUIRE(got);
        if (!got->empty()) return got->front().from();
    }
    FAIL("no hello within 5 s");
    return {};
}

// Whether an unexpected message b sends to `to` arrives at a.
bool reaches(bmi::Session& b, const bmi::Address& to, bmi::Session& a) {
    auto ctx = b.open_context();
    REQUIRE(ctx);
    auto sent = b.post_send_unexpected(*ctx, to, bytes(answer_text), 2);
    REQUIRE(sent);
    for (int i = 0; i < 100; ++i) {
        if (!sent->immediate) (void)b.test(*ctx, sent->id, 0ms);
        auto got = a.test_unexpected(1, 50ms);
        REQUIRE(got);
        if (!got->empty()) return true;
    }
    return false;
}

std::string key_file(const std::string& dir) {
    const std::string path = dir + "/k";
    std::ofstream(path) << std::string(64, '7') << "\n";
    chmod(path.c_str(), 0600);
    return path;
}
}  // namespace

TEST_CASE("a proven peer answers to the listen address it announced", "[keys]") {
    char dir[] = "/tmp/bmi-proven-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string key = "key_file=" + key_file(dir);
    const std::string method = GENERATE(as<std::string>{}, "tcp", "shm");
    const bool keyed = GENERATE(true, false);
    INFO(method << (keyed ? ": both servers hold the key" : ": no key"));
    auto a = server(method, keyed ? key : "");
    auto b = server(method, keyed ? key : "");
    const bmi::Address sender = introduce(*a, *b);
    auto looked_up = b->lookup(a->listen_address());
    REQUIRE(looked_up);
    if (keyed) {
        CHECK(*looked_up == sender);  // the connection A opened serves B's lookup of A
        CHECK(b->rev_lookup(sender) == a->listen_address());
    } else {
        CHECK_FALSE(*looked_up == sender);  // an unproven claim names nothing
    }
    CHECK(reaches(*b, *looked_up, *a));  // either way
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
}

TEST_CASE("a proven peer does not take a name another peer already answers to", "[keys]") {
    char dir[] = "/tmp/bmi-proven-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string key = "key_file=" + key_file(dir);
    const std::string method = GENERATE(as<std::string>{}, "tcp", "shm");
    INFO(method);
    auto a = server(method, key);
    auto b = server(method, key);
    // B holds its own address for A before A calls: the application may use it already.
    auto looked_up = b->lookup(a->listen_address());
    REQUIRE(looked_up);
    const bmi::Address sender = introduce(*a, *b);
    CHECK_FALSE(*looked_up == sender);
    CHECK(b->rev_lookup(*looked_up) == a->listen_address());
    CHECK_FALSE(b->rev_lookup(sender) == a->listen_address());
    CHECK(reaches(*b, *looked_up, *a));
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
}
