// SPDX-License-Identifier: LGPL-2.1-or-later
// benchmark/pingpong and raw_tcp_pingpong as separate server and client processes, with --check.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "process_harness.hpp"

using namespace std::chrono_literals;
using bmi::integration::Process;
using bmi::integration::program_from_env;
using bmi::integration::split_words;

namespace {

struct Row {
    std::uint64_t bytes = 0;
    std::uint64_t iters = 0;
    double latency_us = 0;
    double bandwidth = 0;
};

// Runs one server/client pair and returns the client's table rows; fails the test on any
// non-zero exit.
std::vector<Row> run_pair(const std::string& exe, std::vector<std::string> server_args,
                          const std::vector<std::string>& client_args, std::string* footer) {
    server_args.insert(server_args.begin(), exe);
    Process server = Process::spawn(server_args);
    auto addr = server.read_address(10s);
    REQUIRE(addr);

    std::vector<std::string> argv = {exe, "--client", *addr};
    argv.insert(argv.end(), client_args.begin(), client_args.end());
    Process client = Process::spawn(argv);
    auto status = client.wait(60s);
    REQUIRE(status);
    INFO("client output:\n" << client.unread_output());
    REQUIRE(*status == 0);
    auto server_status = server.wait(20s);
    REQUIRE(server_status);
    REQUIRE(*server_status == 0);

    std::vector<Row> rows;
    std::istringstream lines(client.unread_output());
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("# done:", 0) == 0) *footer = line;
        if (line.empty() || line[0] == '#') continue;
        auto words = split_words(line);
        REQUIRE(words.size() == 4);
        rows.push_back({std::stoull(words[0]), std::stoull(words[1]), std::stod(words[2]),
                        std::stod(words[3])});
    }
    return rows;
}

void check_table(const std::vector<Row>& rows, std::uint64_t min, std::uint64_t max) {
    REQUIRE(!rows.empty());
    CHECK(rows.front().bytes == min);
    CHECK(rows.back().bytes == max);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO("row " << i << ": " << rows[i].bytes << " bytes");
        if (i > 0) CHECK(rows[i].bytes == rows[i - 1].bytes * 2);
        CHECK(rows[i].iters > 0);
        CHECK(rows[i].latency_us > 0);
        CHECK(rows[i].bandwidth > 0);
    }
}

}  // namespace

TEST_CASE("pingpong at small sizes verifies every message over every built method",
          "[integration]") {
    const std::string exe = program_from_env("BMI_PINGPONG");
    // The methods this build has, as meson.build passes them: "tcp shm".
    for (const auto& method : split_words(program_from_env("BMI_ENABLED_METHODS"))) {
        std::string listen;
        if (method == "tcp") listen = "tcp://127.0.0.1:0";
        if (method == "shm") listen = "shm://pingpong-test-" + std::to_string(::getpid());
        if (listen.empty()) {
            WARN("no loopback address known for method " << method << "; not tested here");
            continue;
        }
        INFO("method bmi_" << method);
        const std::string list = "bmi_" + method;
        std::string footer;
        auto rows = run_pair(
            exe, {"--method-list", list, "--server", listen},
            {"--method-list", list, "--min", "1", "--max", "64K", "--iters", "20", "--check"},
            &footer);
        check_table(rows, 1, 65536);
        CHECK(rows.size() == 17);
        CHECK(footer.rfind("# done: 17 sizes", 0) == 0);
    }
}

TEST_CASE("pingpong over bmi_tcp moves large messages intact", "[integration]") {
    const std::string exe = program_from_env("BMI_PINGPONG");
    std::string footer;
    auto rows = run_pair(exe, {"--server"},
                         {"--min", "256K", "--max", "8M", "--iters", "8", "--check"}, &footer);
    check_table(rows, 256 * 1024, 8 * 1024 * 1024);
}

TEST_CASE("raw_tcp_pingpong prints the same plan in the same format", "[integration]") {
    const std::string bmi_exe = program_from_env("BMI_PINGPONG");
    const std::string raw_exe = program_from_env("BMI_RAW_TCP_PINGPONG");
    const std::vector<std::string> plan = {"--min",   "4",  "--max",  "128K",
                                           "--iters", "10", "--check"};
    std::string bmi_footer, raw_footer;
    auto bmi_rows = run_pair(bmi_exe, {"--server"}, plan, &bmi_footer);
    auto raw_rows = run_pair(raw_exe, {"--server"}, plan, &raw_footer);
    check_table(raw_rows, 4, 128 * 1024);
    REQUIRE(raw_rows.size() == bmi_rows.size());
    for (std::size_t i = 0; i < raw_rows.size(); ++i) {
        CHECK(raw_rows[i].bytes == bmi_rows[i].bytes);
        CHECK(raw_rows[i].iters == bmi_rows[i].iters);
    }
}

TEST_CASE("raw_tcp_pingpong --framed keeps every message intact behind its header",
          "[integration]") {
    const std::string raw_exe = program_from_env("BMI_RAW_TCP_PINGPONG");
    const std::string mode = GENERATE(std::string("latency"), std::string("bandwidth"));
    CAPTURE(mode);
    std::string footer;
    // Sizes from 1 B to past a socket buffer, so writev() returns short and the rest follows.
    auto rows = run_pair(
        raw_exe, {"--server", "--framed"},
        {"--framed", "--check", "--mode", mode, "--min", "1", "--max", "4M", "--iters", "8"},
        &footer);
    check_table(rows, 1, 4 * 1024 * 1024);
}

TEST_CASE("pingpong exits 77 (skip) for a method that is not built", "[integration]") {
    const std::string exe = program_from_env("BMI_PINGPONG");
    Process server = Process::spawn(
        {exe, "--method-list", "bmi_no_such_method", "--server", "tcp://127.0.0.1:0"});
    auto status = server.wait(10s);
    REQUIRE(status);
    CHECK(*status == 77);
}
