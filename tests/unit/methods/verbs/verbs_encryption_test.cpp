// SPDX-License-Identifier: LGPL-2.1-or-later
// Encrypted verbs traffic (issue 39), on the soft-RoCE device: messages of every kind arrive
// intact through records and sealed rendezvous data; what a queue pair receives and what a
// peer's RDMA READ fetches (the bytes the fabric carries) never show a known pattern, and show
// it with encryption off; a changed record closes its connection alone; require refuses peers
// that cannot encrypt. Bytes on the fabric are watched from a raw queue pair rather than a
// packet socket: both ends of a test sit on one rxe device, whose traffic to itself never
// reaches a network interface (doc/methods/verbs.md, "Encryption").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../../key_files.hpp"
#include "harness.hpp"
#include "key_test_steps.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/verbs/verbs_records.hpp"
#include "round_trip.hpp"
#include "support/keys/secret_key.hpp"
#include "verbs_raw_peer.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;
using method::verbs::Hello;
using method::verbs::MsgHeader;
using method::verbs::MsgType;
namespace keys = bmi::support::keys;
namespace kit = bmi::method::kit;

namespace {

[[maybe_unused]] const bool device_present = verbs::skip_without_device();

const std::string pattern = "KNOWN-PATTERN-7f3a9c-";

std::vector<char> patterned(std::size_t size) {
    std::vector<char> out(size);
    for (std::size_t i = 0; i < size; ++i) out[i] = pattern[i % pattern.size()];
    return out;
}

bool shows_pattern(const std::uint8_t* data, std::size_t size) {
    const auto* end = data + size;
    return std::search(data, end, pattern.begin(), pattern.end()) != end;
}

method::verbs::Stats stats_of(Side& side, BMI_addr_t any) {
    method::verbs::Stats stats;
    REQUIRE(side.instance->get_info(any, method::verbs::get_stats_option, &stats) == 0);
    return stats;
}

// A bootstrap client of our own that runs the key handshake through the kit, as the method
// does, and then sees the raw bytes of what the server SENDs and offers for READ.
class WatchingPeer {
public:
    WatchingPeer(const std::string& key_path, kit::Encryption policy) {
        keys::SharedKey key;
        REQUIRE(keys::load_key_file(key_path, key) == 0);
        gate_.use(std::move(key));
        gate_.set_encryption(policy);
        handshake_ = kit::KeyHandshake(gate_);
    }

    // HELLO, proof, queue pair, and the first SEND that makes the server count us ready.
    void connect(const std::string& address) {
        REQUIRE(raw_.usable());
        REQUIRE(raw_.dial(address));
        Hello mine = raw_.own_hello();
        mine.features = method::verbs::feature_key_proof | method::verbs::feature_key_binding |
                        method::verbs::feature_key_ciphers;
        const kit::Nonce& nonce =
            handshake_.offer(gate_, raw_.bootstrap_fd(), method::verbs::endpoint_text(mine));
        std::memcpy(mine.nonce, nonce.data(), sizeof mine.nonce);
        mine.ciphers = handshake_.hello_ciphers();
        std::memcpy(mine.public_key, handshake_.hello_public_key().data(), sizeof mine.public_key);
        REQUIRE(raw_.send_bytes(&mine, sizeof mine));
        Hello answer;
        REQUIRE(raw_.read_hello(answer));
        kit::PublicKey theirs;
        std::memcpy(theirs.data(), answer.public_key, theirs.size());
        const kit::KeyFeatures features{true, true, false, answer.ciphers};
        const auto step = handshake_.check_answer(gate_, features, kit::nonce_from(answer.nonce),
                                                  method::verbs::endpoint_text(answer),
                                                  answer.proof, theirs);
        REQUIRE_FALSE(step.refused());
        if (auto traffic = handshake_.take_traffic_keys())
            records_ = std::make_unique<method::verbs::VerbsRecords>(*traffic, true,
                                                                     keys::default_rekey_interval);
        method::verbs::KeyProof proof;
        std::memcpy(proof.proof, step.proof.data(), sizeof proof.proof);
        REQUIRE(raw_.send_bytes(&proof, sizeof proof));
        REQUIRE(raw_.connect_qp(answer));
        char go = 0;
        REQUIRE(verbs::read_within(raw_.bootstrap_fd(), &go, 1, 20000));
        REQUIRE(go == method::verbs::ready_byte);
        MsgHeader credit{};
        credit.type = static_cast<std::uint8_t>(MsgType::credit);
        REQUIRE(send(credit));
    }

    bool encrypted() const { return records_ != nullptr; }

    // A SEND as the method makes it: a record when encrypted. `damage` flips a payload bit
    // after sealing.
    bool send(const MsgHeader& h, const void* body = nullptr, std::size_t size = 0,
              bool damage = false) {
        std::vector<std::uint8_t> m(method::verbs::buffer_size);
        std::memcpy(m.data(), &h, sizeof h);
        if (size > 0) std::memcpy(m.data() + sizeof h, body, size);
        auto length = static_cast<std::uint32_t>(sizeof h + size);
        if (records_) length = records_->seal(m.data(), length);
        if (damage) m[sizeof h] ^= 1;
        return raw_.send_message(h, m.data() + sizeof h, length - sizeof h);
    }

    // The next message other than CREDIT: `wire` is what the queue pair received, `h` and
    // `body` what it says once opened.
    void receive(std::vector<std::uint8_t>& wire, MsgHeader& h, std::vector<std::uint8_t>& body) {
        for (;;) {
            std::vector<std::uint8_t> rest;
            REQUIRE(raw_.receive(h, rest));
            wire.assign(reinterpret_cast<const std::uint8_t*>(&h),
                        reinterpret_cast<const std::uint8_t*>(&h) + sizeof h);
            wire.insert(wire.end(), rest.begin(), rest.end());
            std::vector<std::uint8_t> opened = wire;
            auto length = static_cast<std::uint32_t>(opened.size());
            if (records_) {
                const auto plain = records_->open(opened.data(), length);
                REQUIRE(plain);
                length = *plain;
            }
            body.assign(opened.begin() + sizeof h, opened.begin() + length);
            if (h.type != static_cast<std::uint8_t>(MsgType::credit)) return;
        }
    }

    // What an RDMA READ of the offered segment fetches.
    std::vector<std::uint8_t> read(const method::verbs::RemoteSegment& segment) {
        std::vector<std::uint8_t> out;
        for (std::uint64_t at = 0; at < segment.length;) {
            const auto n =
                static_cast<std::uint32_t>(std::min<std::uint64_t>(16384, segment.length - at));
            std::vector<std::uint8_t> piece;
            REQUIRE(raw_.read(segment.addr + at, segment.rkey, n, piece) == IBV_WC_SUCCESS);
            out.insert(out.end(), piece.begin(), piece.end());
            at += n;
        }
        return out;
    }

    method::verbs::VerbsRecords* records() { return records_.get(); }
    verbs::RawPeer& raw() { return raw_; }

private:
    verbs::RawPeer raw_;
    kit::KeyGate gate_{"verbs"};
    kit::KeyHandshake handshake_;
    std::unique_ptr<method::verbs::VerbsRecords> records_;
};

MsgHeader unexpected_header(std::uint64_t size) {
    MsgHeader h{};
    h.type = static_cast<std::uint8_t>(MsgType::unexpected);
    h.tag = 1;
    h.size = size;
    return h;
}

// The peer connects to the server and sends it one unexpected message: the server's address
// for the peer.
BMI_addr_t introduce(Pair& pair, WatchingPeer& peer) {
    peer.connect(pair.server.instance->listen_addresses());
    const char hello[] = "hi";
    REQUIRE(peer.send(unexpected_header(sizeof hello), hello, sizeof hello));
    core::UnexpectedMessage got;
    REQUIRE(verbs::receive_unexpected(*pair.server.instance, got) == 1);
    pair.server.instance->unexpected_free(got.buffer);
    return got.addr;
}

}  // namespace

TEST_CASE("verbs: encrypted messages of every kind arrive intact", "[verbs][encryption]") {
    KeyFiles files;
    const std::string rekey = GENERATE(as<std::string>{}, "", ",encryption_rekey_records=3");
    INFO("options" << rekey);
    Pair pair = make_peers("verbs", key_option(files.key("k", 1)) + ",encryption=require" + rekey);
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    const BMI_addr_t client_addr = introduce(pair);  // an unexpected message

    std::uint32_t seed = 1;
    for (bmi_size_t size : {bmi_size_t{8}, bmi_size_t{16 * 1024}, bmi_size_t{16 * 1024 + 1},
                            bmi_size_t{200'000}, bmi_size_t{1 << 20}})
        round_trip(pair, client_addr, size, 1, seed++);
    round_trip(pair, client_addr, 3000, 5, seed++);     // an eager list
    round_trip(pair, client_addr, 300'001, 7, seed++);  // a rendezvous list
    // Many small messages: with the tiny interval, dozens of rekeys each way.
    for (int i = 0; i < 30; ++i) round_trip(pair, client_addr, 100 + i, 1, seed++);

    // BMI_memalloc memory on both sides, rendezvous size.
    constexpr bmi_size_t big = 300'000;
    void* out = pair.client.instance->memalloc(pair.server_addr, big);
    void* in = pair.server.instance->memalloc(client_addr, big);
    REQUIRE(out != nullptr);
    REQUIRE(in != nullptr);
    fill_pattern(out, big, 99);
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(recv_request(pair.server, client_addr, in, big, 7), rid,
                                       nullptr) == 0);
    REQUIRE(post_and_wait(pair.client, send_request(pair.client, pair.server_addr, out, big, 7))
                .error == 0);
    REQUIRE(wait_op(pair.server, rid).error == 0);
    CHECK(check_pattern(in, big, 99));
    REQUIRE(pair.client.instance->memfree(pair.server_addr, out) == 0);
    REQUIRE(pair.server.instance->memfree(client_addr, in) == 0);

    const auto client_stats = stats_of(pair.client, pair.server_addr);
    const auto server_stats = stats_of(pair.server, client_addr);
    CHECK(client_stats.encrypted_connections == 1);
    CHECK(server_stats.encrypted_connections == 1);
    CHECK(client_stats.sealed_bytes > 0);
    CHECK(server_stats.sealed_bytes > 0);
}

TEST_CASE("verbs: large encrypted sends wait for staging within its bound", "[verbs][encryption]") {
    KeyFiles files;
    // The smallest bound: each sealed copy of these sends is larger, so one goes at a time.
    Pair pair = make_peers("verbs", key_option(files.key("k", 1)) +
                                        ",encryption=require,verbs_staging_peer_bytes=64K");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    const BMI_addr_t client_addr = introduce(pair);
    constexpr int count = 4;
    constexpr bmi_size_t size = 200'000;
    std::vector<std::vector<char>> out(count), in(count);
    std::vector<bmi_op_id_t> sends(count), recvs(count);
    for (int i = 0; i < count; ++i) {
        out[i].resize(size);
        in[i].resize(size);
        fill_pattern(out[i].data(), out[i].size(), 200 + i);
        REQUIRE(pair.client.instance->post(
                    send_request(pair.client, pair.server_addr, out[i].data(), size, 60 + i),
                    sends[i], nullptr) == 0);
    }
    for (int i = 0; i < count; ++i)
        REQUIRE(pair.server.instance->post(
                    recv_request(pair.server, client_addr, in[i].data(), size, 60 + i), recvs[i],
                    nullptr) == 0);
    for (int i = 0; i < count; ++i) {
        CHECK(wait_op(pair.client, sends[i], 60000).error == 0);
        CHECK(wait_op(pair.server, recvs[i], 60000).error == 0);
        CHECK(check_pattern(in[i].data(), in[i].size(), 200 + i));
    }
    CHECK(stats_of(pair.client, pair.server_addr).staging_waits > 0);
}

TEST_CASE("verbs: the fabric carries no readable pattern with encryption, and does without",
          "[verbs][encryption]") {
    KeyFiles files;
    const std::string key_path = files.key("k", 1);
    const bool encrypt = GENERATE(true, false);
    INFO((encrypt ? "encryption=prefer" : "encryption off on the server"));
    Pair pair = make_peers("verbs", key_option(key_path) + (encrypt ? ",encryption=prefer" : ""));
    Pump server_pump(*pair.server.instance);
    WatchingPeer peer(key_path, kit::Encryption::prefer);
    const BMI_addr_t peer_addr = introduce(pair, peer);
    REQUIRE(peer.encrypted() == encrypt);

    // An eager message and a rendezvous one, both all pattern.
    const auto small = patterned(4000);
    const auto large = patterned(100'000);
    bmi_op_id_t eager_id = 0, rendezvous_id = 0;
    REQUIRE(pair.server.instance->post(
                send_request(pair.server, peer_addr, small.data(), small.size(), 5), eager_id,
                nullptr) >= 0);
    REQUIRE(pair.server.instance->post(
                send_request(pair.server, peer_addr, large.data(), large.size(), 6), rendezvous_id,
                nullptr) == 0);

    std::vector<std::uint8_t> wire, body;
    MsgHeader h;
    peer.receive(wire, h, body);
    REQUIRE(h.type == static_cast<std::uint8_t>(MsgType::eager));
    CHECK(shows_pattern(body.data(), body.size()));
    CHECK(shows_pattern(wire.data(), wire.size()) == !encrypt);

    peer.receive(wire, h, body);
    REQUIRE(h.type == static_cast<std::uint8_t>(MsgType::rts));
    REQUIRE(h.seg_count >= 1);
    method::verbs::RemoteSegment segment;
    std::memcpy(&segment, body.data(), sizeof segment);
    std::vector<std::uint8_t> fetched = peer.read(segment);
    CHECK(shows_pattern(fetched.data(), fetched.size()) == !encrypt);
    if (encrypt) {
        REQUIRE(h.seg_count == 1);
        REQUIRE(fetched.size() == method::verbs::sealed_size(large.size()));
        REQUIRE(method::verbs::open_bulk(peer.records()->cipher(),
                                         peer.records()->recv_bulk_key(h.cookie), h.cookie,
                                         fetched.data(), large.size()));
        CHECK(shows_pattern(fetched.data(), method::verbs::bulk_chunk));
    }
    MsgHeader fin{};
    fin.type = static_cast<std::uint8_t>(MsgType::fin);
    fin.cookie = h.cookie;
    REQUIRE(peer.send(fin));
    CHECK(wait_op(pair.server, rendezvous_id, 30000).error == 0);
}

TEST_CASE("verbs: a changed record closes its connection alone and delivers nothing",
          "[verbs][encryption]") {
    KeyFiles files;
    const std::string key_path = files.key("k", 1);
    Pair pair = make_peers("verbs", key_option(key_path) + ",encryption=require");
    Pump server_pump(*pair.server.instance);
    Pump client_pump(*pair.client.instance);
    WatchingPeer peer(key_path, kit::Encryption::require);
    peer.connect(pair.server.instance->listen_addresses());
    REQUIRE(peer.encrypted());
    const char text[] = "changed on the path";
    REQUIRE(peer.send(unexpected_header(sizeof text), text, sizeof text, true));
    CHECK(peer.raw().closed_by_server(10000));
    core::UnexpectedMessage got;
    CHECK(verbs::receive_unexpected(*pair.server.instance, got, 500) == 0);
    // The real client, encrypted too, is served throughout.
    CHECK(send_first(pair, 30000) == 0);
    REQUIRE(verbs::receive_unexpected(*pair.server.instance, got) == 1);
    pair.server.instance->unexpected_free(got.buffer);
}

TEST_CASE("verbs: a changed chunk of rendezvous data fails the receive and delivers nothing",
          "[verbs][encryption]") {
    KeyFiles files;
    const std::string key_path = files.key("k", 1);
    const bool damage = GENERATE(false, true);
    INFO((damage ? "one bit of the sealed data flipped" : "sealed data as made"));
    Pair pair = make_peers("verbs", key_option(key_path) + ",encryption=require");
    Pump server_pump(*pair.server.instance);
    WatchingPeer peer(key_path, kit::Encryption::require);
    const BMI_addr_t peer_addr = introduce(pair, peer);
    REQUIRE(peer.encrypted());

    constexpr std::uint64_t size = 100'000, cookie = 77;
    std::vector<char> sink(size, 0);
    bmi_op_id_t rid = 0;
    REQUIRE(pair.server.instance->post(
                recv_request(pair.server, peer_addr, sink.data(), static_cast<bmi_size_t>(size), 9),
                rid, nullptr) == 0);
    // What our RTS offers: the data sealed as the method seals it, maybe changed afterwards.
    const auto data = patterned(size);
    const std::span<const std::uint8_t> piece(reinterpret_cast<const std::uint8_t*>(data.data()),
                                              data.size());
    std::vector<std::uint8_t> sealed(method::verbs::sealed_size(size));
    method::verbs::seal_bulk(peer.records()->cipher(), peer.records()->send_bulk_key(cookie),
                             cookie, {&piece, 1}, size, sealed.data());
    if (damage) sealed[70'000] ^= 1;  // inside the second chunk
    ibv_mr* mr = peer.raw().register_for_read(sealed.data(), sealed.size());
    REQUIRE(mr != nullptr);
    MsgHeader rts{};
    rts.type = static_cast<std::uint8_t>(MsgType::rts);
    rts.tag = 9;
    rts.size = size;
    rts.cookie = cookie;
    rts.seg_count = 1;
    const method::verbs::RemoteSegment segment{reinterpret_cast<std::uintptr_t>(sealed.data()),
                                               sealed.size(), mr->rkey, 0};
    REQUIRE(peer.send(rts, &segment, sizeof segment));
    const auto done = wait_op(pair.server, rid, 30000);
    if (damage) {
        CHECK(done.error == -BMI_EPROTO);
        CHECK(std::all_of(sink.begin(), sink.end(), [](char c) { return c == 0; }));
        CHECK(peer.raw().closed_by_server(10000));
    } else {
        CHECK(done.error == 0);
        CHECK(std::equal(sink.begin(), sink.end(), data.begin()));
        CHECK_FALSE(peer.raw().closed_by_server(500));
    }
    ibv_dereg_mr(mr);
}

TEST_CASE("verbs: encryption=require refuses a peer that cannot encrypt", "[verbs][encryption]") {
    KeyFiles files;
    const std::string key = key_option(files.key("k", 1));
    const std::string client = GENERATE(as<std::string>{}, "", "key");
    INFO("client " << (client.empty() ? "keyless" : "keyed, encryption off"));
    Pair pair =
        make_peers("verbs", key + ",encryption=require", client.empty() ? std::string() : key);
    Pump server_pump(*pair.server.instance);
    CHECK(send_first(pair, 30000) == -BMI_EACCES);
    core::UnexpectedMessage got;
    CHECK(verbs::receive_unexpected(*pair.server.instance, got, 500) == 0);
}

TEST_CASE("verbs: a HELLO of an older protocol version is refused at once", "[verbs]") {
    Pair pair = make_peers("verbs");
    Pump server_pump(*pair.server.instance);
    verbs::RawPeer old;
    REQUIRE(old.usable());
    REQUIRE(old.dial(pair.server.instance->listen_addresses()));
    // Version 4's HELLO was shorter: the server must not wait for the rest of ours.
    Hello hello = old.own_hello();
    hello.version = method::verbs::protocol_version - 1;
    REQUIRE(old.send_bytes(&hello, offsetof(Hello, ciphers)));
    CHECK(old.closed_by_server(3000));  // the setup deadline would take 10 s
}
