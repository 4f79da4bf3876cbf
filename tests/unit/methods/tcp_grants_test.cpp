// SPDX-License-Identifier: LGPL-2.1-or-later
// Grants (methods/tcp/tcp_grants.cpp): a receiver that posts a large receive reserves room and
// says so, and the sender's large message leaves as one EAGER frame instead of RTS, CTS, DATA.
// Between two instances the reservation shows whether the grant was used (it stays held while
// unused); against a raw peer, what goes on the wire and what a peer out of step costs itself.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "methods/tcp/tcp_method_impl.hpp"
#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;

namespace {

constexpr bmi_size_t mib = 1 << 20;

TcpMethod& tcp_of(std::unique_ptr<Method>& m) { return static_cast<TcpMethod&>(*m); }

// Whole-buffer comparison that prints a verdict, not a megabyte, when it fails.
bool same(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// A GRANT leaves with the server's next write: here a one-byte reply, as a PVFS server
// answers "send the data" once its receive for the data is posted.
void reply(Pair& p) {
    char byte = 'k', in = 0;
    auto s = make_op(OpKind::send, p.to_client, 99, &byte, 1);
    auto r = make_op(OpKind::recv, p.to_server, 99, &in, 1);
    post(*p.server, *s);
    post(*p.client, *r);
    REQUIRE(p.run([&] { return s->completed && r->completed; }));
    REQUIRE(in == 'k');
}

// The server's one-byte reply to a raw client, read there; returns the frames that came in
// front of it (the GRANTs that waited for a write).
std::vector<Header> reply_raw(Pair& p, const std::shared_ptr<Peer>& peer, int fd) {
    char byte = 'k';
    auto s = make_op(OpKind::send, peer, 99, &byte, 1);
    post(*p.server, *s);
    std::vector<Header> before;
    Header h = read_header(fd, true, *p.server);
    while (h.mode != Mode::eager) {
        before.push_back(h);
        REQUIRE(before.size() <= max_grants_per_connection);
        h = read_header(fd, true, *p.server);
    }
    REQUIRE(h.size == 1);
    char in = 0;
    REQUIRE(raw_read(fd, &in, 1, *p.server));
    REQUIRE(in == 'k');
    REQUIRE(drive({p.server.get()}, [&] { return s->completed; }));
    return before;
}

// A raw v2 client announcing `features`, introduced to p's server by one unexpected message;
// returns the server's peer for it.
std::shared_ptr<Peer> raw_client(Pair& p, int& fd, std::uint64_t features) {
    fd = raw_v2_connect(port_from(p.server->listen_address()), "", *p.server, features);
    REQUIRE(fd >= 0);
    return introduce_v2(fd, p);
}

}  // namespace

TEST_CASE("a large message to a posted receive leaves under its grant", "[tcp][grants]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    // 600,000 is just over the large-eager limit; the largest a GRANT names fits the default
    // per-peer budget with its bookkeeping.
    const bmi_size_t size = GENERATE(bmi_size_t(600000), mib, 4 * mib, grant_size_limit);
    auto data = pattern(std::size_t(size), std::uint32_t(size));
    std::vector<std::uint8_t> in(static_cast<std::size_t>(size));
    auto r = make_op(OpKind::recv, p.to_client, 20, in.data(), size);
    REQUIRE(post(*p.server, *r) == 0);
    CHECK(tcp_of(p.server).grant_bytes_held() == grant_reservation(size));
    reply(p);
    auto s = make_op(OpKind::send, p.to_server, 20, data.data(), size);
    REQUIRE(post(*p.client, *s) >= 0);
    REQUIRE(p.run([&] { return r->completed && s->completed; }));
    CHECK(s->error == 0);
    CHECK(r->error == 0);
    CHECK(r->actual_size == size);
    CHECK(same(in, data));
    // Sent by RTS instead, the message would have left the grant outstanding.
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
}

TEST_CASE("a GRANT rides with a small send that would take send_now's way", "[tcp][grants]") {
    // A PVFS request after the receive for its large answer: the request is small, and the
    // control layer offers it to send_now first. It must not leave without the GRANT.
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::uint8_t> in(static_cast<std::size_t>(mib));
    auto r = make_op(OpKind::recv, p.to_client, 23, in.data(), mib);
    REQUIRE(post(*p.server, *r) == 0);
    char byte = 'q';
    const Segment request{&byte, 1};
    p.server->progress();  // a new pass, so send_now is not refused for a write of this one
    CHECK(p.server->send_now(*p.to_client, OpKind::send, 99, {&request, 1}) == 0);
    // What the control layer does then: the usual post, which carries the GRANT.
    char got = 0;
    auto s = make_op(OpKind::send, p.to_client, 99, &byte, 1);
    auto rq = make_op(OpKind::recv, p.to_server, 99, &got, 1);
    post(*p.server, *s);
    post(*p.client, *rq);
    REQUIRE(p.run([&] { return s->completed && rq->completed; }));
    auto data = pattern(static_cast<std::size_t>(mib), 8);
    auto answer = make_op(OpKind::send, p.to_server, 23, data.data(), mib);
    post(*p.client, *answer);
    REQUIRE(p.run([&] { return r->completed && answer->completed; }));
    CHECK(same(in, data));
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);  // the answer came under the grant
    // With no GRANT waiting, send_now takes small sends again.
    p.server->progress();
    CHECK(p.server->send_now(*p.to_client, OpKind::send, 98, {&request, 1}) == 1);
}

TEST_CASE("a receive beyond the grant budget or size limit gets no grant and still completes",
          "[tcp][grants]") {
    // 8 MiB and its bookkeeping are more than a per-peer budget of 8 MiB; with the budget at 0
    // no receive gets one; at the defaults a receive over the limit a GRANT can name gets none.
    const auto [server_options, size] =
        GENERATE(std::make_pair(std::string("tcp_grant_peer_bytes=8M"), 8 * mib),
                 std::make_pair(std::string("tcp_grant_peer_bytes=0"), mib),
                 std::make_pair(std::string(""), grant_size_limit + mib));
    Pair p("tcp://127.0.0.1:0", 0, server_options);
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    auto data = pattern(std::size_t(size), 3);
    std::vector<std::uint8_t> in(static_cast<std::size_t>(size));
    auto r = make_op(OpKind::recv, p.to_client, 21, in.data(), size);
    REQUIRE(post(*p.server, *r) == 0);
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
    reply(p);
    auto s = make_op(OpKind::send, p.to_server, 21, data.data(), size);
    REQUIRE(post(*p.client, *s) >= 0);
    REQUIRE(p.run([&] { return r->completed && s->completed; }, 10.0));
    CHECK(r->error == 0);
    CHECK(same(in, data));
}

TEST_CASE("at the defaults one peer's grants hold no more than one grant of the largest size",
          "[tcp][grants]") {
    // The per-peer budget is a bound on what a peer can make us hold (doc/RELIABILITY.md):
    // beside a 16 MiB grant there is no room for another, and that receive takes RTS/CTS.
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::uint8_t> big_in(static_cast<std::size_t>(grant_size_limit));
    std::vector<std::uint8_t> small_in(static_cast<std::size_t>(mib));
    auto r_big = make_op(OpKind::recv, p.to_client, 24, big_in.data(), grant_size_limit);
    auto r_small = make_op(OpKind::recv, p.to_client, 25, small_in.data(), mib);
    REQUIRE(post(*p.server, *r_big) == 0);
    REQUIRE(post(*p.server, *r_small) == 0);
    CHECK(tcp_of(p.server).grant_bytes_held() == grant_reservation(grant_size_limit));
    reply(p);
    auto big = pattern(static_cast<std::size_t>(grant_size_limit), 6);
    auto small = pattern(static_cast<std::size_t>(mib), 7);
    auto s_big = make_op(OpKind::send, p.to_server, 24, big.data(), grant_size_limit);
    auto s_small = make_op(OpKind::send, p.to_server, 25, small.data(), mib);
    post(*p.client, *s_big);
    post(*p.client, *s_small);
    REQUIRE(p.run(
        [&] {
            return r_big->completed && r_small->completed && s_big->completed && s_small->completed;
        },
        10.0));
    CHECK(r_big->error == 0);
    CHECK(r_small->error == 0);
    CHECK(same(big_in, big));
    CHECK(same(small_in, small));
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
}

TEST_CASE("a granted message whose receive another took waits whole in its reservation",
          "[tcp][grants]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::uint8_t> first(static_cast<std::size_t>(mib));
    auto r1 = make_op(OpKind::recv, p.to_client, 22, first.data(), mib);
    REQUIRE(post(*p.server, *r1) == 0);
    reply(p);
    // A small message of the same tag, sent first, takes the receive the grant was made for;
    // the large one then comes under the grant and finds no receive.
    auto small = pattern(100, 4);
    auto big = pattern(std::size_t(mib), 5);
    auto s0 = make_op(OpKind::send, p.to_server, 22, small.data(), 100);
    auto s1 = make_op(OpKind::send, p.to_server, 22, big.data(), mib);
    post(*p.client, *s0);
    post(*p.client, *s1);
    REQUIRE(p.run([&] { return r1->completed && s0->completed && s1->completed; }));
    CHECK(r1->error == 0);
    CHECK(r1->actual_size == 100);
    CHECK(std::memcmp(first.data(), small.data(), 100) == 0);
    p.run([] { return false; }, 0.2);  // let it arrive, unmatched
    CHECK(tcp_of(p.server).grant_bytes_held() == grant_reservation(mib));
    // Held against the grant budget, not the early-data budget, whose pauses it would
    // otherwise bring into play.
    CHECK(tcp_of(p.server).early_bytes_held() == 0);
    std::vector<std::uint8_t> second(static_cast<std::size_t>(mib));
    auto r2 = make_op(OpKind::recv, p.to_client, 22, second.data(), mib);
    CHECK(post(*p.server, *r2) == 1);
    CHECK(r2->actual_size == mib);
    CHECK(same(second, big));
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
}

TEST_CASE("grants are bounded per connection and come back when it closes", "[tcp][grants]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    std::vector<std::vector<std::uint8_t>> in(6, std::vector<std::uint8_t>(std::size_t(mib)));
    std::vector<std::unique_ptr<Operation>> recvs;
    for (int i = 0; i < 6; ++i) {
        recvs.push_back(make_op(OpKind::recv, p.to_client, 30 + i, in[i].data(), mib));
        REQUIRE(post(*p.server, *recvs.back()) == 0);
    }
    reply(p);
    CHECK(tcp_of(p.server).grant_bytes_held() ==
          grant_reservation(mib) * bmi_size_t(max_grants_per_connection));
    p.client.reset();  // the client goes, holding four grants it never used
    REQUIRE(drive({p.server.get()}, [&] { return recvs.back()->completed; }));
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
    for (auto& r : recvs) CHECK(r->error < 0);
}

TEST_CASE("a malformed grant budget fails creation", "[tcp][grants]") {
    setenv("BMI_TCP_GRANT_TOTAL_BYTES", "plenty", 1);
    Pair p;
    unsetenv("BMI_TCP_GRANT_TOTAL_BYTES");
    CHECK(p.create_status == -BMI_EINVAL);
}

TEST_CASE("GRANTs go only to a peer that announced them, and are used as given",
          "[tcp][grants][raw]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    SECTION("a peer without feature_grants gets RTS-era treatment: no GRANT") {
        int fd = -1;
        auto peer = raw_client(p, fd, feature_rendezvous | feature_large_eager);
        std::vector<std::uint8_t> in(static_cast<std::size_t>(mib));
        auto r = make_op(OpKind::recv, peer, 5, in.data(), mib);
        REQUIRE(post(*p.server, *r) == 0);
        CHECK(tcp_of(p.server).grant_bytes_held() == 0);
        CHECK(reply_raw(p, peer, fd).empty());  // no GRANT in front of the reply
        p.server->cancel(*r);
        REQUIRE(drive({p.server.get()}, [&] { return r->completed; }));
        close(fd);
    }
    SECTION("a peer with it gets one GRANT, and its EAGER under it lands in the receive") {
        int fd = -1;
        auto peer = raw_client(p, fd, our_features);
        std::vector<std::uint8_t> in(static_cast<std::size_t>(mib));
        auto r = make_op(OpKind::recv, peer, 5, in.data(), mib);
        REQUIRE(post(*p.server, *r) == 0);
        // Never a write of its own: it waits for the next one, and goes in front of it.
        CHECK(raw_silent(fd, *p.server));
        const auto before = reply_raw(p, peer, fd);
        REQUIRE(before.size() == 1);
        const Header& grant = before.front();
        CHECK(grant.mode == Mode::grant);
        CHECK(grant.size == std::uint64_t(mib));
        CHECK(grant.tag == 0);
        CHECK(grant.cookie != 0);
        auto payload = pattern(std::size_t(mib), 6);
        auto frame = v2_frame(Mode::eager, 5, std::uint64_t(mib), grant.cookie);
        frame.insert(frame.end(), payload.begin(), payload.end());
        REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
        REQUIRE(drive({p.server.get()}, [&] { return r->completed; }));
        CHECK(r->error == 0);
        CHECK(same(in, payload));
        CHECK(tcp_of(p.server).grant_bytes_held() == 0);
        close(fd);
    }
}

TEST_CASE("an EAGER frame under no grant of ours, or past its grant, costs the connection",
          "[tcp][grants][raw]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    int fd = -1;
    auto peer = raw_client(p, fd, our_features);
    std::vector<std::uint8_t> in(static_cast<std::size_t>(mib));
    auto r = make_op(OpKind::recv, peer, 5, in.data(), mib);
    REQUIRE(post(*p.server, *r) == 0);
    const auto before = reply_raw(p, peer, fd);
    REQUIRE(before.size() == 1);
    const Header grant = before.front();
    REQUIRE(grant.mode == Mode::grant);
    // Past the grant it names; a cookie never given; the cookie of a grant made but not sent
    // yet (cookies count up, so a peer can guess it).
    const int how = GENERATE(0, 1, 2);
    std::vector<std::uint8_t> second(std::size_t(1) << 20);
    auto r2 = make_op(OpKind::recv, peer, 6, second.data(), mib);
    REQUIRE(post(*p.server, *r2) == 0);
    auto frame = how == 0   ? v2_frame(Mode::eager, 5, std::uint64_t(mib) + 1, grant.cookie)
                 : how == 1 ? v2_frame(Mode::eager, 5, 100, grant.cookie + 1000)
                            : v2_frame(Mode::eager, 5, 100, grant.cookie + 1);
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    CHECK(raw_closed(fd, *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return r->completed; }));
    CHECK(r->error == -BMI_EPROTO);
    CHECK(tcp_of(p.server).grant_bytes_held() == 0);
    close(fd);
}

TEST_CASE("our sender uses a peer's GRANT, and a peer that grants past the bound loses us",
          "[tcp][grants][raw]") {
    ClientOfRaw raw;
    // A small send brings the connection up; the raw acceptor answers HELLO with the feature.
    auto hi = pattern(10, 1);
    auto first = make_op(OpKind::send, raw.peer, 1, hi.data(), 10);
    REQUIRE(post(*raw.client, *first) == 0);
    int fd = -1;
    auto offered = raw_accept_hello(raw, our_features, fd);
    REQUIRE(offered);
    CHECK((offered->features & feature_grants) != 0);

    SECTION("a message the grant covers goes as one EAGER frame under its cookie") {
        auto grant = v2_frame(Mode::grant, 0, std::uint64_t(mib), 77);
        REQUIRE(raw_write(fd, grant.data(), grant.size(), *raw.client));
        drive(
            {raw.client.get()}, [] { return false; }, 0.05);
        auto data = pattern(std::size_t(mib), 7);
        auto s = make_op(OpKind::send, raw.peer, 9, data.data(), mib);
        post(*raw.client, *s);
        Header h = read_header(fd, true, *raw.client);
        CHECK(h.mode == Mode::eager);
        CHECK(h.cookie == 77);
        CHECK(h.size == std::uint64_t(mib));
        std::vector<std::uint8_t> got(static_cast<std::size_t>(mib));
        REQUIRE(raw_read(fd, got.data(), got.size(), *raw.client));
        CHECK(same(got, data));
        REQUIRE(drive({raw.client.get()}, [&] { return s->completed; }));
        CHECK(s->error == 0);
        // The grant is spent: the next large message announces itself.
        auto s2 = make_op(OpKind::send, raw.peer, 9, data.data(), mib);
        post(*raw.client, *s2);
        CHECK(read_header(fd, true, *raw.client).mode == Mode::rts);
    }
    SECTION("a fifth outstanding GRANT closes the connection") {
        for (std::uint64_t cookie = 1; cookie <= max_grants_per_connection + 1; ++cookie) {
            auto grant = v2_frame(Mode::grant, 0, std::uint64_t(mib), cookie);
            REQUIRE(raw_write(fd, grant.data(), grant.size(), *raw.client));
        }
        CHECK(raw_closed(fd, *raw.client));
    }
    close(fd);
}
