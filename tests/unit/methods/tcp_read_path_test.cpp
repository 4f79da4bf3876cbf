// SPDX-License-Identifier: LGPL-2.1-or-later
// How the tcp method reads frames off a socket: a large payload goes straight into its receive
// with only the next header read ahead, in every mix of large and small frames, whole or in
// pieces, legacy (OrangeFS) and v2 framing.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;

namespace {

// The read-family system calls this process has made (/proc/self/io's syscr); reading it
// costs one more.
long read_calls() {
    char text[512];
    const int fd = open("/proc/self/io", O_RDONLY);
    REQUIRE(fd >= 0);
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    REQUIRE(n > 0);
    text[n] = '\0';
    const char* at = std::strstr(text, "syscr:");
    REQUIRE(at != nullptr);
    return std::strtol(at + 6, nullptr, 10);
}

// A raw legacy client of a libbmi server, and the server's peer for it.
struct LegacyClient {
    Pair p;
    int fd = -1;
    std::shared_ptr<Peer> peer;

    LegacyClient() {
        REQUIRE(p.create_status == 0);
        fd = raw_connect(port_from(p.server->listen_address()));
        auto hi = legacy_frame(Mode::unexpected, 1, {'h', 'i'});
        REQUIRE(raw_write(fd, hi.data(), hi.size(), *p.server));
        REQUIRE(drive({p.server.get()}, [&] { return !p.server_sink.unexpected.empty(); }));
        peer = p.server_sink.unexpected.back().peer;
    }
    ~LegacyClient() { close(fd); }
    LegacyClient(const LegacyClient&) = delete;
    LegacyClient& operator=(const LegacyClient&) = delete;

    // The legacy frame (EAGER up to 16 KiB, else REND) carrying payload under tag.
    static std::vector<std::uint8_t> frame(bmi_msg_tag_t tag,
                                           const std::vector<std::uint8_t>& payload) {
        const bool eager = payload.size() <= static_cast<std::size_t>(eager_limit);
        return legacy_frame(eager ? Mode::eager : Mode::rendezvous, tag, payload);
    }
};

}  // namespace

TEST_CASE("a run of large legacy frames costs two reads each, none to find the socket empty",
          "[tcp][read]") {
    LegacyClient c;
    Method& server = *c.p.server;
    const auto payload = pattern(64 * 1024, 7);
    std::vector<std::uint8_t> in(payload.size());
    // One frame at a time, each whole in the socket before the server looks: header, payload.
    auto receive_one = [&](bmi_msg_tag_t tag) {
        auto r = make_op(OpKind::recv, c.peer, tag, in.data(), bmi_size_t(in.size()));
        REQUIRE(post(server, *r) == 0);
        auto f = LegacyClient::frame(tag, payload);
        REQUIRE(send(c.fd, f.data(), f.size(), MSG_NOSIGNAL) == ssize_t(f.size()));
        const long before = read_calls();
        REQUIRE(drive({&server}, [&] { return r->completed; }));
        const long reads = read_calls() - before - 1;
        CHECK(r->error == 0);
        CHECK(in == payload);
        return reads;
    };
    receive_one(30);  // the first large header is read with the read-ahead
    constexpr int frames = 8;
    long reads = 0;
    for (int i = 0; i < frames; ++i) reads += receive_one(31 + i);
    // Through the read-ahead it was three: 32 KiB with the header, the rest of the payload,
    // and one more that found the socket empty.
    CHECK(reads <= 2 * frames + 1);
}

TEST_CASE("legacy frames of every size in a row arrive intact, whole or in pieces", "[tcp][read]") {
    const std::vector<std::size_t> sizes = {65536,  100,   40000, 1,     32768, 16384,
                                            100000, 32767, 0,     70000, 24,    200000};
    const std::size_t piece = GENERATE(std::size_t{0}, std::size_t{1000}, std::size_t{32768});
    const bool posted_first = GENERATE(true, false);
    CAPTURE(piece, posted_first);
    LegacyClient c;
    Method& server = *c.p.server;
    std::vector<std::vector<std::uint8_t>> payloads, ins;
    std::vector<std::unique_ptr<Operation>> recvs;
    std::vector<std::uint8_t> stream;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        payloads.push_back(pattern(sizes[i], std::uint32_t(i + 3)));
        ins.emplace_back(sizes[i] + 1);
        auto f = LegacyClient::frame(bmi_msg_tag_t(40 + i), payloads.back());
        stream.insert(stream.end(), f.begin(), f.end());
    }
    auto post_all = [&] {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            recvs.push_back(make_op(OpKind::recv, c.peer, bmi_msg_tag_t(40 + i), ins[i].data(),
                                    bmi_size_t(ins[i].size())));
            post(server, *recvs.back());
        }
    };
    // The first frame goes whole; a REND that finds no receive stops the reading until one is
    // posted, so the rest is written only once the receives are there.
    const std::size_t first = legacy_header_size + sizes[0];
    if (posted_first) post_all();
    REQUIRE(raw_write(c.fd, stream.data(), first, server));
    if (!posted_first) {
        drive(
            {&server}, [] { return false; }, 0.1);
        post_all();
    }
    const std::size_t step = piece == 0 ? stream.size() : piece;
    for (std::size_t at = first; at < stream.size(); at += step)
        REQUIRE(raw_write(c.fd, stream.data() + at, std::min(step, stream.size() - at), server));
    REQUIRE(drive({&server}, [&] {
        return std::all_of(recvs.begin(), recvs.end(), [](auto& r) { return r->completed; });
    }));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        CAPTURE(i, sizes[i]);
        CHECK(recvs[i]->error == 0);
        CHECK(recvs[i]->actual_size == bmi_size_t(sizes[i]));
        CHECK(std::equal(payloads[i].begin(), payloads[i].end(), ins[i].begin()));
    }
}

TEST_CASE("v2 messages of every size in a burst arrive intact", "[tcp][read]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    const std::vector<std::size_t> sizes = {70000, 10, 200000, 65536, 5, 32768, 2 << 20, 100};
    std::vector<std::vector<std::uint8_t>> payloads, ins;
    std::vector<std::unique_ptr<Operation>> ops;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        payloads.push_back(pattern(sizes[i], std::uint32_t(i + 11)));
        ins.emplace_back(sizes[i]);
        ops.push_back(make_op(OpKind::recv, p.to_client, bmi_msg_tag_t(60 + i), ins[i].data(),
                              bmi_size_t(sizes[i])));
        post(*p.server, *ops.back());
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        ops.push_back(make_op(OpKind::send, p.to_server, bmi_msg_tag_t(60 + i), payloads[i].data(),
                              bmi_size_t(sizes[i])));
        post(*p.client, *ops.back());
    }
    REQUIRE(p.run([&] {
        return std::all_of(ops.begin(), ops.end(), [](auto& op) { return op->completed; });
    }));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        CAPTURE(i, sizes[i]);
        CHECK(ops[i]->error == 0);
        CHECK(ins[i] == payloads[i]);
    }
}
