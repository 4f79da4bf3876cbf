// SPDX-License-Identifier: LGPL-2.1-or-later
// The verbs method across real processes: credit exhaustion with a slow receiver, many peers
// on one SRQ, and a peer killed mid-transfer while another carries on. Children are forked
// before the parent opens the RDMA device and get the parent's address through a pipe.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test::verbs;
using method::OpKind;

namespace {
[[maybe_unused]] const bool device_present = skip_without_device();

struct Server {
    std::unique_ptr<core::Instance> instance;
    bmi_context_id context = -1;
    std::string address;
    explicit Server(const std::string& options = "") {
        core::InitParams params;
        params.listen = "verbs://127.0.0.1:0";
        params.flags = BMI_INIT_SERVER;
        params.options = options;
        REQUIRE(core::Instance::create(params, instance) == 0);
        REQUIRE(instance->open_context(context) == 0);
        address = instance->listen_addresses();
    }
    core::Completion wait(bmi_op_id_t id, int deadline_ms = 60000) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
        for (;;) {
            int outcount = 0;
            core::Completion c;
            REQUIRE(instance->test(id, context, 50, outcount, c) == 0);
            if (outcount == 1) return c;
            if (std::chrono::steady_clock::now() > deadline) FAIL("operation did not complete");
        }
    }
};

// Tells a child's message i apart from every other (child, i).
int word(int child, int i) { return child * 100000 + i; }

int introduce(ChildSide& me, int who) {
    return me.run(request(OpKind::send_unexpected, me.parent, &who, sizeof who, 1, me.context));
}
}  // namespace

TEST_CASE("verbs: a sender out of credits queues until a slow receiver catches up", "[verbs]") {
    constexpr int count = 300;
    constexpr bmi_size_t size = 1024;
    Child child([](const std::string& address, int up) {
        ChildSide me;
        if (int rc = me.open(address); rc != 0) return rc;
        if (introduce(me, 0) != 0) return 10;
        report(up, 'h');
        // The slow receiver: no progress at all for a while, so no credits go back.
        std::this_thread::sleep_for(std::chrono::seconds(4));
        std::vector<int> in(size / sizeof(int));
        for (int i = 0; i < count; ++i) {
            bmi_size_t actual = 0;
            if (me.run(request(OpKind::recv, me.parent, in.data(), size, 7, me.context), 60000,
                       &actual) != 0 ||
                actual != size)
                return 11;
            if (in[0] != i || in.back() != i) return 12;  // intact and in order
        }
        report(up, 'k');
        return 0;
    });
    Server server;
    child.start(server.address);
    core::UnexpectedMessage hello;
    REQUIRE(receive_unexpected(*server.instance, hello) == 1);
    REQUIRE(child.wait_report() == 'h');
    server.instance->unexpected_free(hello.buffer);

    std::vector<std::vector<int>> out(count);
    std::vector<bmi_op_id_t> ids;
    int done = 0;
    for (int i = 0; i < count; ++i) {
        out[static_cast<std::size_t>(i)].assign(size / sizeof(int), i);
        bmi_op_id_t id = 0;
        int rc = server.instance->post(request(OpKind::send, hello.addr,
                                               out[static_cast<std::size_t>(i)].data(), size, 7,
                                               server.context),
                                       id, nullptr);
        REQUIRE(rc >= 0);
        if (rc == 1)
            ++done;
        else
            ids.push_back(id);
    }
    // For one second of our own progress the receiver sleeps: at most its credits went out.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
        core::Completion got[16];
        int outcount = 0;
        REQUIRE(server.instance->testcontext(server.context, 20, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) REQUIRE(got[k].error == 0);
        done += outcount;
    }
    method::verbs::Stats stats;
    REQUIRE(server.instance->get_info(hello.addr, method::verbs::get_stats_option, &stats) == 0);
    INFO("sent before the receiver woke: " << done);
    REQUIRE(done <= 16);  // the default window
    REQUIRE(stats.credit_waits > 0);
    // Then everything drains as credits come back.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (done < count && std::chrono::steady_clock::now() < deadline) {
        core::Completion got[16];
        int outcount = 0;
        REQUIRE(server.instance->testcontext(server.context, 20, outcount, got) == 0);
        for (int k = 0; k < outcount; ++k) REQUIRE(got[k].error == 0);
        done += outcount;
    }
    REQUIRE(done == count);
    REQUIRE(child.wait_report() == 'k');
    REQUIRE(child.wait_exit() == 0);
}

TEST_CASE("verbs: many peers share one SRQ smaller than their combined credits", "[verbs]") {
    constexpr int peers = 10;
    constexpr int messages = 24;
    auto size_of = [](int i) -> bmi_size_t { return i % 4 == 3 ? 200000 : 2048; };
    std::vector<std::unique_ptr<Child>> children;
    for (int p = 0; p < peers; ++p)
        children.push_back(std::make_unique<Child>([p, size_of](const std::string& address, int) {
            ChildSide me;
            if (int rc = me.open(address); rc != 0) return rc;
            if (introduce(me, p) != 0) return 10;
            std::vector<int> out;
            for (int i = 0; i < messages; ++i) {
                out.assign(static_cast<std::size_t>(size_of(i)) / sizeof(int), word(p, i));
                if (me.run(request(OpKind::send, me.parent, out.data(), size_of(i), 3,
                                   me.context)) != 0)
                    return 11;
            }
            return 0;
        }));
    // 10 peers x 16 credits = 160 > 96 buffers: bursts beyond the SRQ wait in RNR retry.
    Server server("verbs_srq_cap=96");
    for (auto& c : children) c->start(server.address);
    std::vector<BMI_addr_t> addr(peers, 0);
    for (int k = 0; k < peers; ++k) {
        core::UnexpectedMessage hello;
        if (receive_unexpected(*server.instance, hello) != 1) {
            for (auto& c : children) std::fprintf(stderr, "child exit %d\n", c->wait_exit(100));
            FAIL("only " << k << " peers introduced themselves");
        }
        int who = *static_cast<int*>(hello.buffer);
        REQUIRE(who >= 0);
        REQUIRE(who < peers);
        addr[static_cast<std::size_t>(who)] = hello.addr;
        // The handle is used after its peer may have left: hold a reference, as a server must
        // (an unreferenced address of a departed peer is freed; guide-server.md).
        REQUIRE(server.instance->set_info(hello.addr, BMI_INC_ADDR_REF, nullptr) == 0);
        server.instance->unexpected_free(hello.buffer);
    }
    std::vector<std::vector<int>> in(peers * messages, std::vector<int>(200000 / sizeof(int)));
    std::vector<bmi_op_id_t> ids;
    std::vector<bmi_size_t> sizes;
    for (int p = 0; p < peers; ++p)
        for (int i = 0; i < messages; ++i) {
            bmi_op_id_t id = 0;
            bmi_size_t actual = 0;
            int rc =
                server.instance->post(request(OpKind::recv, addr[static_cast<std::size_t>(p)],
                                              in[static_cast<std::size_t>(p * messages + i)].data(),
                                              200000, 3, server.context),
                                      id, &actual);
            REQUIRE(rc >= 0);  // 1: an eager message that was already here
            ids.push_back(rc == 1 ? 0 : id);
            sizes.push_back(actual);
        }
    for (int p = 0; p < peers; ++p)
        for (int i = 0; i < messages; ++i) {
            const auto k = static_cast<std::size_t>(p * messages + i);
            core::Completion got;
            got.actual_size = sizes[k];
            if (ids[k] != 0) got = server.wait(ids[k]);
            REQUIRE(got.error == 0);
            REQUIRE(got.actual_size == size_of(i));
            const auto& v = in[static_cast<std::size_t>(p * messages + i)];
            REQUIRE(v[0] == word(p, i));
            REQUIRE(v[static_cast<std::size_t>(size_of(i)) / sizeof(int) - 1] == word(p, i));
        }
    for (auto& c : children) REQUIRE(c->wait_exit() == 0);
    method::verbs::Stats stats;
    REQUIRE(server.instance->get_info(addr[0], method::verbs::get_stats_option, &stats) == 0);
    REQUIRE(stats.srq_buffers <= 96);
}

TEST_CASE("verbs: a peer killed mid-transfer fails its operations; another peer continues",
          "[verbs]") {
    constexpr bmi_size_t big = 48 << 20;
    Child victim([](const std::string& address, int up) {
        ChildSide me;
        if (int rc = me.open(address); rc != 0) return rc;
        if (introduce(me, 0) != 0) return 10;
        std::vector<char> in(static_cast<std::size_t>(big));
        bmi_op_id_t id = 0;
        if (me.instance->post(request(OpKind::recv, me.parent, in.data(), big, 5, me.context), id,
                              nullptr) != 0)
            return 11;
        report(up, 'r');
        for (;;) {  // keep reading until killed
            int outcount = 0;
            core::Completion c;
            me.instance->test(id, me.context, 50, outcount, c);
        }
    });
    Child survivor([](const std::string& address, int up) {
        ChildSide me;
        if (int rc = me.open(address); rc != 0) return rc;
        if (introduce(me, 1) != 0) return 10;
        report(up, 's');
        std::vector<char> in(1 << 20);
        bmi_size_t actual = 0;
        int rc = me.run(request(OpKind::recv, me.parent, in.data(), 1 << 20, 8, me.context), 60000,
                        &actual);
        if (rc != 0 || actual != (1 << 20) || in[12345] != 'z') {
            std::fprintf(stderr, "survivor: receive failed: %d, %lld bytes\n", rc,
                         static_cast<long long>(actual));
            return 11;
        }
        char reply[8] = "alive";
        if (me.run(request(OpKind::send, me.parent, reply, 8, 9, me.context)) != 0) return 12;
        for (;;) {  // keep progressing (our FIN and reply must leave) until the parent ends us
            int outcount = 0;
            core::Completion c[1];
            me.instance->testcontext(me.context, 50, outcount, c);
        }
    });
    Server server;
    victim.start(server.address);
    survivor.start(server.address);
    BMI_addr_t addr[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        core::UnexpectedMessage hello;
        REQUIRE(receive_unexpected(*server.instance, hello) == 1);
        addr[*static_cast<int*>(hello.buffer)] = hello.addr;
        // Used after its peer is killed: hold a reference (see above).
        REQUIRE(server.instance->set_info(hello.addr, BMI_INC_ADDR_REF, nullptr) == 0);
        server.instance->unexpected_free(hello.buffer);
    }
    REQUIRE(victim.wait_report() == 'r');
    REQUIRE(survivor.wait_report() == 's');

    std::vector<char> out(static_cast<std::size_t>(big), 'v');
    char small[16];
    bmi_op_id_t sid = 0, rid = 0;
    REQUIRE(
        server.instance->post(request(OpKind::send, addr[0], out.data(), big, 5, server.context),
                              sid, nullptr) == 0);
    REQUIRE(server.instance->post(request(OpKind::recv, addr[0], small, 16, 6, server.context), rid,
                                  nullptr) == 0);
    // Let the READs start, then kill the reader.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) {
        int outcount = 0;
        core::Completion c;
        REQUIRE(server.instance->test(sid, server.context, 20, outcount, c) == 0);
        REQUIRE(outcount == 0);  // 48 MB cannot have been read yet
    }
    std::fprintf(stderr, "killing the reader\n");
    victim.kill_now();
    auto sent = server.wait(sid, 30000);
    auto received = server.wait(rid, 30000);
    REQUIRE(sent.error != 0);
    REQUIRE(received.error != 0);
    // A BMI code, not a raw verbs status.
    for (int e : {sent.error, received.error})
        REQUIRE((e == -BMI_ECONNRESET || e == -BMI_ETIMEDOUT || e == -BMI_EPROTO || e == -BMI_EIO));

    // The other peer is untouched.
    std::vector<char> ping(1 << 20, 'z');
    char reply[8] = {};
    bmi_op_id_t pid = 0, qid = 0;
    REQUIRE(server.instance->post(request(OpKind::recv, addr[1], reply, 8, 9, server.context), qid,
                                  nullptr) == 0);
    REQUIRE(server.instance->post(
                request(OpKind::send, addr[1], ping.data(), 1 << 20, 8, server.context), pid,
                nullptr) == 0);
    REQUIRE(server.wait(pid).error == 0);
    REQUIRE(server.wait(qid).error == 0);
    REQUIRE(std::strcmp(reply, "alive") == 0);
}
