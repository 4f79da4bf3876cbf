// SPDX-License-Identifier: LGPL-2.1-or-later
// Security keys on tcp (issue 16): only peers that prove the key get in, nothing of a refused
// peer reaches the application, and keyless instances behave as before. Real sockets over
// loopback; the attacker is a raw socket that knows the wire format (and, to make a recorded
// handshake, the key).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>

#include "../key_files.hpp"
#include "methods/kit/key_exchange.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "support/keys/key_proof.hpp"
#include "tcp_raw_peer.hpp"

using namespace bmi::method;
using namespace bmi::method::tcp;
using namespace bmi::method::tcp::test;
using bmi::test::KeyFiles;
namespace keys = bmi::support::keys;

namespace {

std::string key_option(const std::string& path) { return "key_file=" + path; }

// Posts one unexpected message from the pair's client and waits for it to finish; its error.
int send_hello(Pair& p, std::vector<Method*> also = {}) {
    char text[] = "hello";
    auto op = make_op(OpKind::send_unexpected, p.to_server, 1, text, sizeof text);
    post(*p.client, *op);
    also.push_back(p.server.get());
    also.push_back(p.client.get());
    REQUIRE(drive(also, [&] { return op->completed; }));
    return op->error;
}

TcpMethod& tcp_of(Method& m) { return static_cast<TcpMethod&>(m); }

// The first flight of a keyed initiator, as a raw socket sends it.
struct RawHandshake {
    int fd = -1;
    std::vector<std::uint8_t> hello;  // the HELLO frame as written
    keys::Nonce nonce{};
    Hello ack;
    std::string endpoint;  // the acceptor's, as our socket reached it
};

RawHandshake raw_keyed_hello(std::uint16_t port, Method& m) {
    RawHandshake h;
    h.fd = raw_connect(port);
    h.endpoint = bmi::method::kit::acceptor_endpoint(h.fd, keys::Role::initiator);
    h.nonce = keys::fresh_nonce();
    Hello hello{feature_rendezvous | feature_key_proof | feature_key_binding | feature_key_ciphers,
                ""};
    hello.nonce = h.nonce;
    h.hello = encode_hello(hello, false);
    REQUIRE(raw_write(h.fd, h.hello.data(), h.hello.size(), m));
    Header head = read_header(h.fd, false, m);
    REQUIRE(head.mode == Mode::hello_ack);
    std::vector<std::uint8_t> body(head.size);
    REQUIRE(raw_read(h.fd, body.data(), body.size(), m));
    auto ack = decode_hello_body(body);
    REQUIRE(ack);
    REQUIRE(ack->proof);
    h.ack = *ack;
    return h;
}

keys::Transcript transcript_of(const RawHandshake& h) {
    keys::Transcript t;
    t.plane = "tcp";
    t.initiator_nonce = h.nonce;
    t.acceptor_nonce = h.ack.nonce;
    t.acceptor_endpoint = h.endpoint;
    t.acceptor_address = h.ack.address;
    t.initiator_address = "";
    return t;
}

std::vector<std::uint8_t> unexpected_v2(const char* text) {
    const std::size_t n = std::strlen(text);
    auto frame = v2_frame(Mode::unexpected, 1, n, 0);
    frame.insert(frame.end(), text, text + n);
    return frame;
}

// Writes the proof (and a message right behind it) and says whether the server kept the
// connection: the message is delivered if so, and nothing at all is if not.
bool proof_admitted(RawHandshake& h, const std::vector<std::uint8_t>& proof_frame, Pair& p) {
    auto bytes = proof_frame;
    auto message = unexpected_v2("sneak");
    bytes.insert(bytes.end(), message.begin(), message.end());
    const std::size_t before = p.server_sink.unexpected.size();
    REQUIRE(raw_write(h.fd, bytes.data(), bytes.size(), *p.server));
    bool closed = false;
    REQUIRE(drive({p.server.get()}, [&] {
        char c;
        const ssize_t n = recv(h.fd, &c, 1, 0);
        closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        return closed || p.server_sink.unexpected.size() > before;
    }));
    // A refused connection delivered nothing, not even what came with its proof.
    CHECK(p.server_sink.unexpected.size() == (closed ? before : before + 1));
    close(h.fd);
    return !closed;
}

// A server and a client that hold the same key, introduced to each other.
struct KeyedPair {
    KeyFiles files;
    std::string path = files.key("k", 1);
    Pair p{"tcp://127.0.0.1:0", 0, key_option(path), key_option(path)};
    KeyedPair() {
        REQUIRE(p.create_status == 0);
        REQUIRE(p.connect());
    }
};

}  // namespace

// The shared rule (conformance, peer rules) lets tcp's first keyless send complete; here the
// sends after the server's refusal must fail, and the server's application sees nothing.
TEST_CASE("tcp: a keyless client of a keyed server: its first message is dropped, the rest refused",
          "[tcp][keys]") {
    KeyFiles files;
    Pair p("tcp://127.0.0.1:0", 0, key_option(files.key("k1", 1)), "");
    REQUIRE(p.create_status == 0);
    // The first message leaves with the upgrade offer, before the server can say that it
    // wants a key: written, completed, and dropped unread.
    CHECK(send_hello(p) == 0);
    REQUIRE(drive({p.server.get(), p.client.get()},
                  [&] { return tcp_of(*p.client).refusals().refused() > 0; }));
    CHECK(send_hello(p) == -BMI_EACCES);
    CHECK(send_hello(p) == -BMI_EACCES);
    p.run([] { return false; }, 0.2);
    CHECK(p.server_sink.unexpected.empty());
    CHECK(p.server_sink.registered.empty());
    CHECK(p.server_sink.completions.empty());
}

TEST_CASE("tcp: with no key on either side nothing changes", "[tcp][keys]") {
    unsetenv("BMI_KEY_FILE");
    Pair p;
    REQUIRE(p.create_status == 0);
    CHECK(send_hello(p) == 0);
    // A legacy (OrangeFS) peer is served as before.
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto frame = legacy_frame(Mode::unexpected, 1, {'o', 'k'});
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    REQUIRE(drive({p.server.get()}, [&] { return p.server_sink.unexpected.size() == 2; }));
    close(fd);
}

TEST_CASE("tcp: a legacy peer is refused when a key is in force", "[tcp][keys]") {
    KeyedPair keyed;
    Pair& p = keyed.p;
    int fd = raw_connect(port_from(p.server->listen_address()));
    auto frame = legacy_frame(Mode::unexpected, 1, {'n', 'o'});
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    CHECK(raw_closed(fd, *p.server));
    close(fd);
    CHECK(p.server_sink.unexpected.size() == 1);  // the keyed client's only
    CHECK(tcp_of(*p.server).refusals().refused() == 1);
    CHECK(send_hello(p) == 0);
}

TEST_CASE("tcp: a keyed client does not fall back to legacy framing", "[tcp][keys]") {
    KeyFiles files;
    Config cc;
    REQUIRE(cc.settings.load(key_option(files.key("k", 1))) == 0);
    TestSink sink;
    std::unique_ptr<Method> client;
    REQUIRE(create(cc, sink, client) == 0);
    std::uint16_t port = 0;
    int listener = raw_listen(port);
    std::shared_ptr<Peer> server;
    REQUIRE(client->lookup("tcp://127.0.0.1:" + std::to_string(port), server) == 0);
    char text[] = "x";
    auto op = make_op(OpKind::send_unexpected, server, 1, text, 1);
    post(*client, *op);
    // What an OrangeFS acceptor does with a HELLO: read it and hang up.
    int fd = raw_accept(listener, *client);
    REQUIRE(fd >= 0);
    std::uint8_t head[legacy_header_size];
    REQUIRE(raw_read(fd, head, sizeof head, *client));
    close(fd);
    REQUIRE(drive({client.get()}, [&] { return op->completed; }));
    CHECK(op->error == -BMI_EACCES);
    // And no second, legacy connection was tried.
    CHECK(raw_silent(listener, *client, 0.2));
    int again = accept(listener, nullptr, nullptr);
    CHECK(again < 0);
    close(listener);
}

TEST_CASE("tcp: recorded, reflected and malformed handshakes are refused", "[tcp][keys]") {
    setenv("BMI_TCP_STALL_TIMEOUT_MS", "300", 1);  // the handshake deadline
    KeyedPair keyed;
    unsetenv("BMI_TCP_STALL_TIMEOUT_MS");
    Pair& p = keyed.p;
    keys::SharedKey key;
    REQUIRE(keys::load_key_file(keyed.path, key) == 0);
    const std::uint16_t port = port_from(p.server->listen_address());

    // A good raw handshake, recorded.
    RawHandshake good = raw_keyed_hello(port, *p.server);
    CHECK(keys::verify(*key, keys::Role::acceptor, transcript_of(good), *good.ack.proof));
    const auto proof_frame =
        encode_hello_proof(keys::prove(*key, keys::Role::initiator, transcript_of(good)));
    const auto recorded_hello = good.hello;
    CHECK(proof_admitted(good, proof_frame, p));

    SECTION("replayed from a raw socket") {
        RawHandshake replay;
        replay.fd = raw_connect(port);
        REQUIRE(raw_write(replay.fd, recorded_hello.data(), recorded_hello.size(), *p.server));
        Header head = read_header(replay.fd, false, *p.server);
        std::vector<std::uint8_t> body(head.size);
        REQUIRE(raw_read(replay.fd, body.data(), body.size(), *p.server));
        CHECK_FALSE(proof_admitted(replay, proof_frame, p));
    }
    SECTION("the acceptor's own proof reflected back") {
        RawHandshake reflect = raw_keyed_hello(port, *p.server);
        CHECK_FALSE(proof_admitted(reflect, encode_hello_proof(*reflect.ack.proof), p));
    }
    SECTION("a truncated or oversized proof") {
        for (std::size_t size : {std::size_t{0}, std::size_t{20}, std::size_t{64}}) {
            RawHandshake bad = raw_keyed_hello(port, *p.server);
            std::vector<std::uint8_t> frame(legacy_header_size + size, 0);
            Header h;
            h.magic = hello_magic;
            h.mode = Mode::hello_proof;
            h.size = size;
            encode_header(h, Framing::orangefs, frame.data());
            CHECK_FALSE(proof_admitted(bad, frame, p));
        }
    }
    SECTION("a proof that never finishes, or never comes, meets the handshake deadline") {
        RawHandshake slow = raw_keyed_hello(port, *p.server);
        auto partial = proof_frame;
        partial.resize(legacy_header_size + 10);
        REQUIRE(raw_write(slow.fd, partial.data(), partial.size(), *p.server));
        int idle = raw_connect(port);
        CHECK(raw_closed(slow.fd, *p.server, 3.0));
        CHECK(raw_closed(idle, *p.server, 3.0));
        close(slow.fd);
        close(idle);
    }
    SECTION("a flood of failing handshakes costs one log line") {
        const auto before = tcp_of(*p.server).refusals();
        for (int i = 0; i < 40; ++i) {
            RawHandshake bad = raw_keyed_hello(port, *p.server);
            keys::Proof guess{};
            guess[0] = static_cast<std::uint8_t>(i);
            CHECK_FALSE(proof_admitted(bad, encode_hello_proof(guess), p));
        }
        const auto& after = tcp_of(*p.server).refusals();
        CHECK(after.refused() - before.refused() == 40);
        CHECK(after.suppressed() - before.suppressed() >= 39);
    }
    // Meanwhile the keyed client keeps working.
    CHECK(send_hello(p) == 0);
}

namespace {

// One whole hello-family frame (legacy-layout header and body) from a raw socket, or nothing
// if the other side closed first or said nothing within the wait.
std::optional<std::vector<std::uint8_t>> read_hello_frame(int fd, const std::vector<Method*>& m) {
    std::vector<std::uint8_t> frame(legacy_header_size);
    auto read_exactly = [&](std::uint8_t* to, std::size_t size) {
        std::size_t done = 0;
        bool closed = false;
        drive(
            m,
            [&] {
                const ssize_t n = recv(fd, to + done, size - done, 0);
                if (n > 0) done += static_cast<std::size_t>(n);
                closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
                return done == size || closed;
            },
            3.0);
        return done == size;
    };
    if (!read_exactly(frame.data(), frame.size())) return std::nullopt;
    const Header h = decode_header(frame.data(), Framing::orangefs);
    if (h.size > hello_max_body) return std::nullopt;
    frame.resize(legacy_header_size + h.size);
    if (!read_exactly(frame.data() + legacy_header_size, h.size)) return std::nullopt;
    return frame;
}

Mode mode_of(const std::vector<std::uint8_t>& frame) {
    return decode_header(frame.data(), Framing::orangefs).mode;
}

// What the attacker of the reflection attacks got out of it.
struct AttackOutcome {
    bool acceptor_proof_obtained = false;  // an acceptor proof came back on the second socket
    bool initiator_proof_leaked = false;   // the instance proved itself on the first socket
    bool second_socket_admitted = false;   // a message injected on it reached the application
};

// The endpoint `victim` dialled is the attacker's (`dialled`, a raw listener). The attacker
// sends the victim's own HELLO to `target`'s listener, carries target's answer back to the
// victim, and, if the victim proves itself, carries that proof to target and injects a message.
AttackOutcome relay_handshake(Method& victim, int dialled, Method& target, TestSink& target_sink,
                              std::vector<Method*> running) {
    AttackOutcome out;
    const int first = raw_accept(dialled, victim);
    REQUIRE(first >= 0);
    auto hello = read_hello_frame(first, running);
    REQUIRE(hello);
    REQUIRE(mode_of(*hello) == Mode::hello);
    const int second = raw_connect(port_from(target.listen_address()));
    REQUIRE(raw_write(second, hello->data(), hello->size(), target));
    auto ack = read_hello_frame(second, running);
    if (ack && mode_of(*ack) == Mode::hello_ack) {
        out.acceptor_proof_obtained = true;
        REQUIRE(raw_write(first, ack->data(), ack->size(), victim));
        auto proof = read_hello_frame(first, running);
        if (proof && mode_of(*proof) == Mode::hello_proof) {
            out.initiator_proof_leaked = true;
            auto bytes = *proof;
            auto message = unexpected_v2("injected");
            bytes.insert(bytes.end(), message.begin(), message.end());
            REQUIRE(raw_write(second, bytes.data(), bytes.size(), target));
            drive(
                running, [&] { return !target_sink.unexpected.empty(); }, 1.0);
            out.second_socket_admitted = !target_sink.unexpected.empty();
        }
    }
    close(first);
    close(second);
    return out;
}

// A keyed instance that looked up an endpoint the attacker holds and sends it a secret.
struct DialsAttacker {
    std::uint16_t port = 0;
    int listener = raw_listen(port);
    char secret[24] = "for the real peer only";
    std::unique_ptr<Operation> op;
    explicit DialsAttacker(Method& victim) {
        std::shared_ptr<Peer> taken;
        REQUIRE(victim.lookup("tcp://127.0.0.1:" + std::to_string(port), taken) == 0);
        op = make_op(OpKind::send_unexpected, taken, 1, secret, sizeof secret);
        post(victim, *op);
    }
    ~DialsAttacker() { close(listener); }
    // The send failed the clear way: the endpoint could not prove the key.
    bool refused(Method& victim) {
        return drive({&victim}, [&] { return op->completed; }) && op->error == -BMI_EACCES;
    }
};

}  // namespace

TEST_CASE("tcp: a keyless attacker cannot reflect an instance's handshake into itself",
          "[tcp][keys]") {
    // The instance dials an endpoint the attacker holds (a peer's port it took over, a
    // redirected name) and the attacker replays the instance's own HELLO to its listener.
    KeyedPair keyed;
    Pair& p = keyed.p;
    DialsAttacker dials(*p.server);
    const std::size_t before = p.server_sink.unexpected.size();
    const AttackOutcome got =
        relay_handshake(*p.server, dials.listener, *p.server, p.server_sink, {p.server.get()});
    CHECK_FALSE(got.initiator_proof_leaked);
    CHECK_FALSE(got.second_socket_admitted);
    CHECK(p.server_sink.unexpected.size() == before);
    CHECK(dials.refused(*p.server));
    // The instance's real peers are not affected.
    CHECK(send_hello(p) == 0);
}

TEST_CASE("tcp: a keyless attacker cannot relay one key holder's handshake to another",
          "[tcp][keys]") {
    // As above, but the attacker carries the HELLO to a second instance with the same key:
    // its proof is made for its own endpoint, not for the one the first instance dialled.
    KeyedPair keyed;
    Pair& p = keyed.p;
    Pair other{"tcp://127.0.0.1:0", 0, key_option(keyed.path), key_option(keyed.path)};
    REQUIRE(other.create_status == 0);
    DialsAttacker dials(*p.server);
    const AttackOutcome got = relay_handshake(*p.server, dials.listener, *other.server,
                                              other.server_sink,
                                              {p.server.get(), other.server.get()});
    CHECK(got.acceptor_proof_obtained);  // the other instance answers any keyed HELLO
    CHECK_FALSE(got.initiator_proof_leaked);
    CHECK_FALSE(got.second_socket_admitted);
    CHECK(other.server_sink.unexpected.empty());
    CHECK(dials.refused(*p.server));
}

TEST_CASE("tcp: a keyed peer of the first key handshake is refused, not admitted", "[tcp][keys]") {
    KeyedPair keyed;
    Pair& p = keyed.p;
    const int fd = raw_connect(port_from(p.server->listen_address()));
    Hello hello{feature_rendezvous | feature_key_proof, ""};  // no feature_key_binding
    hello.nonce = keys::fresh_nonce();
    const auto frame = encode_hello(hello, false);
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    CHECK(raw_closed(fd, *p.server));
    close(fd);
    CHECK(tcp_of(*p.server).refusals().refused() == 1);
}

TEST_CASE("tcp: a keyed peer whose proofs do not cover the cipher fields is refused and told",
          "[tcp][keys]") {
    KeyedPair keyed;
    Pair& p = keyed.p;
    const int fd = raw_connect(port_from(p.server->listen_address()));
    // An older libbmi: bound endpoints, no feature_key_ciphers.
    Hello hello{feature_rendezvous | feature_key_proof | feature_key_binding, ""};
    hello.nonce = keys::fresh_nonce();
    const auto frame = encode_hello(hello, false);
    REQUIRE(raw_write(fd, frame.data(), frame.size(), *p.server));
    Header head = read_header(fd, false, *p.server);
    REQUIRE(head.mode == Mode::hello_ack);
    std::vector<std::uint8_t> body(head.size);
    REQUIRE(raw_read(fd, body.data(), body.size(), *p.server));
    const auto ack = decode_hello_body(body);
    REQUIRE(ack);
    CHECK((ack->features & feature_key_required) != 0);
    CHECK_FALSE(ack->proof);
    CHECK(raw_closed(fd, *p.server));
    close(fd);
    CHECK(tcp_of(*p.server).refusals().refused() == 1);
}

TEST_CASE("tcp: two instances with two keys never accept each other's peers", "[tcp][keys]") {
    KeyFiles files;
    const std::string key1 = key_option(files.key("k1", 1));
    const std::string key2 = key_option(files.key("k2", 2));
    Pair a("tcp://127.0.0.1:0", 0, key1, key1);
    Pair b("tcp://127.0.0.1:0", 0, key2, key2);
    REQUIRE(a.create_status == 0);
    REQUIRE(b.create_status == 0);
    std::vector<Method*> others_of_a{b.server.get(), b.client.get()};
    std::vector<Method*> others_of_b{a.server.get(), a.client.get()};
    CHECK(send_hello(a, others_of_a) == 0);
    CHECK(send_hello(b, others_of_b) == 0);
    // a's client aimed at b's server, and b's client at a's server.
    REQUIRE(a.client->lookup(b.server->listen_address(), a.to_server) == 0);
    REQUIRE(b.client->lookup(a.server->listen_address(), b.to_server) == 0);
    CHECK(send_hello(a, others_of_a) == -BMI_EACCES);
    CHECK(send_hello(b, others_of_b) == -BMI_EACCES);
    CHECK(a.server_sink.unexpected.size() == 1);
    CHECK(b.server_sink.unexpected.size() == 1);
}

TEST_CASE("tcp: a bad key file stops the instance from starting", "[tcp][keys]") {
    KeyFiles files;
    Config config;
    TestSink sink;
    std::unique_ptr<Method> m;
    REQUIRE(config.settings.load(
                key_option(files.write("world", std::vector<std::uint8_t>(32, 1), 0644))) == 0);
    CHECK(create(config, sink, m) == -BMI_EACCES);
    REQUIRE(config.settings.load(key_option(files.dir() + "/missing")) == 0);
    CHECK(create(config, sink, m) == -BMI_ENOENT);
    REQUIRE(config.settings.load(
                key_option(files.write("short", std::vector<std::uint8_t>(16, 1)))) == 0);
    CHECK(create(config, sink, m) == -BMI_EINVAL);
    CHECK_FALSE(m);
}
