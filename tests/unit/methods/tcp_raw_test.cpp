// SPDX-License-Identifier: LGPL-2.1-or-later
// The tcp method against plain POSIX sockets: bad input, legacy (OrangeFS) framing in both
// directions, the upgrade offer in OrangeFS frames, the fallback from HELLO to legacy, and the
// stall timeout.
#include <catch2/catch.hpp>

#include <poll.h>

#include <algorithm>
#include <optional>

#include "methods/tcp/tcp_settings.hpp"
#include "socket_probe.hpp"
#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;
using bmi::test::port_of;
using bmi::test::socket_with_port;
using bmi::test::tcp_option;

namespace {

// Sends HELLO under magic and reads the acceptor's answer.
struct HelloAnswer {
    Header header;
    std::optional<Hello> hello;
};
HelloAnswer raw_handshake(int fd, std::uint32_t magic, Method& m) {
    auto hello = encode_hello(Hello{feature_rendezvous, ""}, false, magic);
    REQUIRE(raw_write(fd, hello.data(), hello.size(), m));
    HelloAnswer answer;
    answer.header = read_header(fd, false, m);
    std::vector<std::uint8_t> body(std::min<std::uint64_t>(answer.header.size, hello_max_body));
    REQUIRE(raw_read(fd, body.data(), body.size(), m));
    answer.hello = decode_hello_body(body);
    return answer;
}

}  // namespace

TEST_CASE("a bad magic kills only that connection", "[tcp][raw]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    REQUIRE(p.connect());
    int fd = raw_connect(port_from(p.server->listen_address()));
    std::vector<std::uint8_t> junk(legacy_header_size, 0x11);
    REQUIRE(raw_write(fd, junk.data(), junk.size(), *p.server));
    CHECK(raw_closed(fd, *p.server));
    close(fd);

    auto data = pattern(100, 1);
    std::vector<std::uint8_t> in(100);
    auto r = make_op(OpKind::recv, p.to_client, 5, in.data(), 100);
    post(*p.server, *r);
    auto s = make_op(OpKind::send, p.to_server, 5, data.data(), 100);
    post(*p.client, *s);
    REQUIRE(p.run([&] { return r->completed && s->completed; }));
    CHECK(r->error == 0);
    CHECK(in == data);
}

TEST_CASE("the listen backlog is OrangeFS's 256", "[tcp][raw]") {
    // Nobody accepts while the server is not driven: the kernel completes the handshakes of
    // backlog + 1 connects and leaves the others waiting for room.
    Pair p;
    REQUIRE(p.create_status == 0);
    sockaddr_in sa = loopback(port_from(p.server->listen_address()));
    std::vector<pollfd> connects;
    for (int i = 0; i < 300; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        REQUIRE(fd >= 0);
        (void)connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
        connects.push_back(pollfd{fd, POLLOUT, 0});
    }
    (void)poll(connects.data(), connects.size(), 300);
    int connected = 0;
    for (const pollfd& c : connects) {
        int error = -1;
        socklen_t length = sizeof error;
        if ((c.revents & POLLOUT) != 0 &&
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
            ++connected;
        close(c.fd);
    }
    CHECK(connected == 257);
}

TEST_CASE("an oversized unexpected header closes the connection unread", "[tcp][raw]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    int fd = raw_connect(port_from(p.server->listen_address()));
    Header h;
    h.mode = Mode::unexpected;
    h.size = 1ull << 40;
    std::uint8_t buf[legacy_header_size];
    encode_header(h, Framing::orangefs, buf);
    REQUIRE(raw_write(fd, buf, sizeof buf, *p.server));
    CHECK(raw_closed(fd, *p.server));
    CHECK(p.server_sink.used == 0);
    close(fd);
}

TEST_CASE("v2 handshake from a raw peer; an unknown DATA cookie is a protocol error",
          "[tcp][raw]") {
    // wire_magic: the HELLO of a libbmi client older than hello_magic, still accepted, and
    // answered under the magic that client checks for.
    const std::uint32_t magic = GENERATE(hello_magic, wire_magic);
    Pair p;
    REQUIRE(p.create_status == 0);
    int fd = raw_connect(port_from(p.server->listen_address()));
    HelloAnswer answer = raw_handshake(fd, magic, *p.server);
    CHECK(answer.header.magic == magic);
    CHECK(answer.header.mode == Mode::hello_ack);
    REQUIRE(answer.hello);
    CHECK(answer.hello->address == p.server->listen_address());

    Header data;
    data.mode = Mode::data;
    data.size = 10;
    data.cookie = 424242;
    std::uint8_t buf[v2_header_size];
    encode_header(data, Framing::v2, buf);
    REQUIRE(raw_write(fd, buf, sizeof buf, *p.server));
    CHECK(raw_closed(fd, *p.server));
    close(fd);
}

TEST_CASE("legacy client interop", "[tcp][raw][legacy]") {
    Pair p;
    REQUIRE(p.create_status == 0);
    int fd = raw_connect(port_from(p.server->listen_address()));
    Method& server = *p.server;

    auto hi = legacy_frame(Mode::unexpected, 1, {'h', 'i'});
    REQUIRE(raw_write(fd, hi.data(), hi.size(), server));
    REQUIRE(drive({&server}, [&] { return !p.server_sink.unexpected.empty(); }));
    auto peer = p.server_sink.unexpected.back().peer;
    CHECK(peer->addr() != 0);
    CHECK(server.peer_host(*peer) == "127.0.0.1");
    CHECK(server.query_range(*peer, "tcp://127.0.0.0", 8) == 1);

    // Legacy EAGER arriving before the receive is buffered and matched at post.
    auto eager_payload = pattern(100, 2);
    auto eager = legacy_frame(Mode::eager, 5, eager_payload);
    REQUIRE(raw_write(fd, eager.data(), eager.size(), server));
    drive(
        {&server}, [] { return false; }, 0.2);
    std::vector<std::uint8_t> in(200);
    auto r = make_op(OpKind::recv, peer, 5, in.data(), 200);
    CHECK(post(server, *r) == 1);
    CHECK(r->actual_size == 100);
    CHECK(std::equal(eager_payload.begin(), eager_payload.end(), in.begin()));

    // Legacy REND with no receive: the server stops reading until one is posted.
    auto rend_payload = pattern(64 * 1024, 3);
    auto rend = legacy_frame(Mode::rendezvous, 6, rend_payload);
    REQUIRE(raw_write(fd, rend.data(), rend.size(), server));
    drive(
        {&server}, [] { return false; }, 0.2);
    std::vector<std::uint8_t> in_rend(rend_payload.size());
    auto rr = make_op(OpKind::recv, peer, 6, in_rend.data(), bmi_size_t(in_rend.size()));
    post(server, *rr);
    REQUIRE(drive({&server}, [&] { return rr->completed; }));
    CHECK(rr->error == 0);
    CHECK(in_rend == rend_payload);

    // Replies to a legacy client use legacy headers: EAGER, then REND with inline payload.
    auto small = pattern(100, 4);
    auto s1 = make_op(OpKind::send, peer, 9, small.data(), 100);
    post(server, *s1);
    Header h1 = read_header(fd, false, server);
    CHECK(h1.magic == wire_magic);
    CHECK(h1.mode == Mode::eager);
    CHECK(tag_of(h1) == 9);
    CHECK(h1.size == 100);
    std::vector<std::uint8_t> got(100);
    REQUIRE(raw_read(fd, got.data(), got.size(), server));
    CHECK(got == small);

    auto large = pattern(100000, 5);
    auto s2 = make_op(OpKind::send, peer, 10, large.data(), 100000);
    post(server, *s2);
    Header h2 = read_header(fd, false, server);
    CHECK(h2.mode == Mode::rendezvous);
    CHECK(h2.size == 100000);
    got.resize(100000);
    REQUIRE(raw_read(fd, got.data(), got.size(), server));
    CHECK(got == large);
    REQUIRE(drive({&server}, [&] { return s1->completed && s2->completed; }));

    std::vector<std::uint8_t> huge(1);
    auto s3 = make_op(OpKind::send, peer, 11, huge.data(), legacy_message_limit + 1);
    CHECK(server.post(*s3) == -BMI_EMSGSIZE);
    // No legacy peer can send more than 16 MiB, so such a receive is refused when posted, as
    // OrangeFS refuses it; one of exactly 16 MiB is posted.
    auto r3 = make_op(OpKind::recv, peer, 11, huge.data(), legacy_message_limit + 1);
    CHECK(server.post(*r3) == -BMI_EINVAL);
    auto r4 = make_op(OpKind::recv, peer, 11, huge.data(), legacy_message_limit);
    CHECK(server.post(*r4) == 0);
    server.cancel(*r4);
    CHECK(r4->error == -BMI_ECANCEL);
    close(fd);
}

TEST_CASE("a client sends OrangeFS frames at once, with the offer in the tag's upper half",
          "[tcp][raw][legacy]") {
    ClientOfRaw raw;
    int listener = raw.listener;
    auto& client = raw.client;
    auto& peer = raw.peer;
    auto small = pattern(100, 6);
    auto large = pattern(100000, 7);
    auto s1 = make_op(OpKind::send, peer, -3, small.data(), 100);
    auto s2 = make_op(OpKind::send, peer, 4, large.data(), 100000);
    REQUIRE(post(*client, *s1) == 0);
    REQUIRE(post(*client, *s2) == 0);

    // Behave like OrangeFS: check the magic, keep the low 32 bits of the tag, ignore the rest.
    int fd = raw_accept(listener, *client);
    REQUIRE(fd >= 0);
    Header h1 = read_header(fd, false, *client);
    CHECK(h1.magic == wire_magic);
    CHECK(h1.mode == Mode::eager);
    CHECK(tag_of(h1) == -3);
    CHECK(offers_upgrade(h1));
    std::vector<std::uint8_t> got(100);
    REQUIRE(raw_read(fd, got.data(), got.size(), *client));
    CHECK(got == small);
    Header h2 = read_header(fd, false, *client);
    CHECK(h2.mode == Mode::rendezvous);
    CHECK(tag_of(h2) == 4);
    got.resize(100000);
    REQUIRE(raw_read(fd, got.data(), got.size(), *client));
    CHECK(got == large);
    REQUIRE(drive({client.get()}, [&] { return s1->completed && s2->completed; }));
    CHECK(s1->error == 0);
    CHECK(s2->error == 0);

    // An answer in OrangeFS framing declines the offer: later frames carry a plain tag.
    char in[2];
    auto r = make_op(OpKind::recv, peer, 9, in, 2);
    REQUIRE(post(*client, *r) == 0);
    auto reply = legacy_frame(Mode::eager, 9, {'o', 'k'});
    REQUIRE(raw_write(fd, reply.data(), reply.size(), *client));
    REQUIRE(drive({client.get()}, [&] { return r->completed; }));
    CHECK(r->error == 0);
    auto s3 = make_op(OpKind::send, peer, -5, small.data(), 10);
    post(*client, *s3);
    Header h3 = read_header(fd, false, *client);
    CHECK(h3.tag == wire_tag(-5));
    close(fd);
}

TEST_CASE("a client whose first send needs v2 opens with HELLO, and falls back when it is dropped",
          "[tcp][raw][legacy]") {
    ClientOfRaw raw;
    int listener = raw.listener;
    auto& client = raw.client;
    auto& peer = raw.peer;
    // An unexpected message's class has no room in OrangeFS framing.
    char text[] = "classed";
    auto s1 = make_op(OpKind::send_unexpected, peer, 3, text, sizeof text);
    s1->msg_class = 2;
    REQUIRE(post(*client, *s1) == 0);

    // Behave like OrangeFS: read the header, see a magic other than 51903, close.
    int first = raw_accept(listener, *client);
    REQUIRE(first >= 0);
    Header hello = read_header(first, false, *client);
    CHECK(hello.magic == hello_magic);
    CHECK(hello.mode == Mode::hello);
    close(first);

    int second = raw_accept(listener, *client);
    REQUIRE(second >= 0);
    Header h1 = read_header(second, false, *client);
    CHECK(h1.mode == Mode::unexpected);
    CHECK(h1.tag == wire_tag(3));  // the peer is known legacy: no offer
    std::vector<std::uint8_t> got(sizeof text);
    REQUIRE(raw_read(second, got.data(), got.size(), *client));
    REQUIRE(drive({client.get()}, [&] { return s1->completed; }));
    CHECK(s1->error == 0);
    close(second);
}

TEST_CASE("a send that needs v2 waits for the offer's answer at most the stall timeout",
          "[tcp][raw][legacy]") {
    Config config;
    REQUIRE(config.settings.load("tcp_stall_timeout_ms=300") == 0);
    ClientOfRaw raw(config);
    char hi[] = "hi";
    auto s1 = make_op(OpKind::send, raw.peer, 1, hi, 2);
    REQUIRE(post(*raw.client, *s1) == 0);
    // An OrangeFS server with nothing to say: it reads the offer and never answers.
    int fd = raw_accept(raw.listener, *raw.client);
    REQUIRE(fd >= 0);
    Header h = read_header(fd, false, *raw.client);
    CHECK(offers_upgrade(h));
    REQUIRE(drive({raw.client.get()}, [&] { return s1->completed; }));
    char text[] = "classed";
    auto s2 = make_op(OpKind::send_unexpected, raw.peer, 2, text, sizeof text);
    s2->msg_class = 3;
    post(*raw.client, *s2);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(drive(
        {raw.client.get()}, [&] { return s2->completed; }, 5.0));
    CHECK(s2->error == -BMI_ETIMEDOUT);
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(waited >= std::chrono::milliseconds(250));
    CHECK(waited < std::chrono::seconds(3));
    close(fd);
}

TEST_CASE("a receive over 16 MiB posted before the offer is declined fails with it",
          "[tcp][raw][legacy]") {
    ClientOfRaw raw;
    int listener = raw.listener;
    auto& client = raw.client;
    auto& peer = raw.peer;
    char small[16];
    auto fits = make_op(OpKind::recv, peer, 3, small, sizeof small);
    auto huge = make_op(OpKind::recv, peer, 4, nullptr, legacy_message_limit + 1);
    huge->single.data = small;  // never written: the receive must fail before any data
    REQUIRE(post(*client, *fits) == 0);
    REQUIRE(post(*client, *huge) == 0);
    char msg[] = "x";
    auto s = make_op(OpKind::send_unexpected, peer, 1, msg, 1);
    post(*client, *s);
    // An OrangeFS acceptor: takes the message, answers in its own framing.
    int fd = raw_accept(listener, *client);
    REQUIRE(fd >= 0);
    Header h = read_header(fd, false, *client);
    REQUIRE(raw_read(fd, small, static_cast<std::size_t>(h.size), *client));
    auto reply = legacy_frame(Mode::eager, 3, {'o', 'k'});
    REQUIRE(raw_write(fd, reply.data(), reply.size(), *client));
    REQUIRE(drive({client.get()}, [&] { return huge->completed && fits->completed; }));
    CHECK(huge->error == -BMI_EINVAL);
    CHECK(fits->error == 0);
    close(fd);
}

TEST_CASE("BMI_TCP_LEGACY=1 never sends HELLO", "[tcp][raw][legacy]") {
    Config legacy;
    REQUIRE(legacy.settings.set(bmi::method::tcp::SettingId::legacy, "1",
                                bmi::support::SettingSource::environment) == 0);
    ClientOfRaw raw(legacy);
    int listener = raw.listener;
    auto& client = raw.client;
    auto& peer = raw.peer;
    char msg[] = "abc";
    auto s = make_op(OpKind::send_unexpected, peer, 12, msg, 3);
    post(*client, *s);
    int fd = raw_accept(listener, *client);
    REQUIRE(fd >= 0);
    Header h = read_header(fd, false, *client);
    CHECK(h.mode == Mode::unexpected);
    CHECK(h.size == 3);
    close(fd);
}

TEST_CASE("a connection stalled mid-header times out", "[tcp][raw]") {
    setenv("BMI_TCP_STALL_TIMEOUT_MS", "300", 1);
    Pair p;
    unsetenv("BMI_TCP_STALL_TIMEOUT_MS");
    REQUIRE(p.create_status == 0);
    int fd = raw_connect(port_from(p.server->listen_address()));
    std::uint8_t partial[10] = {0xBF, 0xCA, 0, 0, 4};
    REQUIRE(raw_write(fd, partial, sizeof partial, *p.server));
    const auto start = std::chrono::steady_clock::now();
    CHECK(raw_closed(fd, *p.server, 3.0));
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    close(fd);
}

TEST_CASE("large eager frames only between peers that both announce them", "[tcp][raw]") {
    SECTION("our acceptor announces the feature, and refuses a large EAGER from a peer "
            "that did not") {
        Pair p;
        REQUIRE(p.create_status == 0);
        int fd = raw_connect(port_from(p.server->listen_address()));
        // raw_handshake announces only feature_rendezvous: a libbmi peer of before the
        // feature, limited to 64 KiB both ways.
        HelloAnswer answer = raw_handshake(fd, hello_magic, *p.server);
        REQUIRE(answer.hello);
        CHECK((answer.hello->features & feature_large_eager) != 0);
        std::vector<std::uint8_t> frame(v2_header_size);
        Header h;
        h.mode = Mode::eager;
        h.tag = 5;
        h.size = std::uint64_t(v2_eager_limit) + 1;
        encode_header(h, Framing::v2, frame.data());
        REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
        CHECK(raw_closed(fd, *p.server));
        close(fd);
    }
    SECTION("our initiator sends rendezvous above 64 KiB to an acceptor without it") {
        ClientOfRaw raw;
        char hi[] = "hi";
        auto opener = make_op(OpKind::send, raw.peer, 5, hi, 2);
        REQUIRE(post(*raw.client, *opener) == 0);
        int fd = -1;
        auto offered = raw_accept_hello(raw, feature_rendezvous, fd);
        REQUIRE(offered);
        CHECK((offered->features & feature_large_eager) != 0);
        auto data = pattern(70000, 8);
        auto s = make_op(OpKind::send, raw.peer, 6, data.data(), 70000);
        REQUIRE(post(*raw.client, *s) == 0);
        Header first = read_header(fd, true, *raw.client);
        CHECK(first.mode == Mode::rts);
        CHECK(first.size == 70000);
        close(fd);
    }
}

TEST_CASE("every connection carries the silent-peer bound of its settings", "[tcp][raw]") {
    SECTION("the default, on a connection the method made") {
        ClientOfRaw raw;
        char hi[] = "hi";
        auto send = make_op(OpKind::send, raw.peer, 1, hi, 2);
        REQUIRE(post(*raw.client, *send) == 0);
        const int accepted = raw_accept(raw.listener, *raw.client);
        REQUIRE(accepted >= 0);
        const int ours = socket_with_port(port_of(accepted, false), true);
        REQUIRE(ours >= 0);
        CHECK(tcp_option(ours, TCP_USER_TIMEOUT) == 8000);
        CHECK(tcp_option(ours, TCP_KEEPIDLE) == 5);
        CHECK(tcp_option(ours, TCP_KEEPINTVL) == 1);
        CHECK(tcp_option(ours, TCP_KEEPCNT) == 3);
        close(accepted);
    }
    SECTION("a setting, on a connection the method accepted") {
        Pair p("tcp://127.0.0.1:0", 0, "tcp_silent_peer_timeout_ms=30s");
        REQUIRE(p.create_status == 0);
        const int fd = raw_connect(port_from(p.server->listen_address()));
        const std::uint16_t our_port = port_of(fd, true);
        int accepted = -1;
        REQUIRE(drive({p.server.get()},
                      [&] { return (accepted = socket_with_port(our_port, false)) >= 0; }));
        CHECK(tcp_option(accepted, TCP_USER_TIMEOUT) == 30000);
        CHECK(tcp_option(accepted, TCP_KEEPIDLE) == 27);
        close(fd);
    }
}

TEST_CASE("a silent-peer bound under 2 s is refused", "[tcp]") {
    Config config;
    CHECK(config.settings.load("tcp_silent_peer_timeout_ms=1500") < 0);
    CHECK(config.settings.load("tcp_silent_peer_timeout_ms=2s") == 0);
}
