// SPDX-License-Identifier: LGPL-2.1-or-later
// Encrypted ofi traffic (doc/security.md, "ofi"), over the provider the run selects: messages
// of every kind arrive intact through numbered records and sealed large-message data, across
// many key steps; the bytes the provider carries never show a known pattern, and show it with
// encryption off (so the check can fail): over ofi+tcp what crosses the loopback interface,
// read from a packet socket; over ofi+shm the provider's regions in /dev/shm. require refuses a
// peer that cannot encrypt, and prefer falls back to plain traffic with one.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../unit/key_files.hpp"
#include "harness.hpp"
#include "methods/method_config.hpp"
#include "round_trip.hpp"

#if BMI_METHOD_OFI
#include "methods/kit/key_handshake.hpp"
#include "methods/ofi/ofi_handshake.hpp"
#include "ofi_raw_endpoint.hpp"
#include "ofi_stats.hpp"
#include "support/keys/numbered_records.hpp"
#include "support/keys/sealed_bulk.hpp"
#include "support/keys/secret_key.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {

std::string provider() {
    const char* p = std::getenv("BMI_CONFORMANCE_OFI_PROVIDER");
    return p != nullptr && *p != '\0' ? p : "tcp";
}

// Unique to this process, so another test's traffic cannot show it.
std::string known_pattern() { return "KNOWN-OFI-PATTERN-" + std::to_string(getpid()) + "-"; }

std::vector<char> patterned(std::size_t size) {
    const std::string pattern = known_pattern();
    std::vector<char> out(size);
    for (std::size_t i = 0; i < size; ++i) out[i] = pattern[i % pattern.size()];
    return out;
}

bool shows_pattern(const std::vector<char>& bytes) {
    const std::string pattern = known_pattern();
    return std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end()) != bytes.end();
}

// Unexpected, small, near the eager limit (above rxm's own eager size), large (a
// rendezvous in chunks) and a large list.
void every_kind(Pair& pair, BMI_addr_t client, const std::vector<char>* payload = nullptr) {
    std::vector<char> note(200);
    if (payload != nullptr)
        std::copy(payload->begin(), payload->begin() + 200, note.begin());
    else
        fill_pattern(note.data(), note.size(), 99);
    core::PostRequest unexpected =
        unexpected_request(pair.client, pair.server_addr, note.data(), 200, 9);
    {
        Pump receiver(*pair.server.instance);
        REQUIRE(post_and_wait(pair.client, unexpected, 30000).error == 0);
    }
    const core::UnexpectedMessage got = wait_unexpected(pair.server, 30000);
    REQUIRE(got.error == 0);
    REQUIRE(got.size == 200);
    CHECK(std::memcmp(got.buffer, note.data(), 200) == 0);
    pair.server.instance->unexpected_free(got.buffer);

    const bmi_size_t sizes[] = {1, 100, 60 * 1024, 3 * 1024 * 1024 + 17};
    std::uint32_t seed = 1;
    for (bmi_size_t size : sizes) {
        round_trip(pair, client, size, 1, seed, payload, 30000);
        seed += 2;
    }
    round_trip(pair, client, 2 * 1024 * 1024 + 5, 3, seed);
}

// Every frame that crosses the loopback interface while it runs, from a packet socket (needs
// CAP_NET_RAW; usable() says whether it could be opened).
class LoopbackRecorder {
public:
    LoopbackRecorder() {
        fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
        if (fd_ < 0) return;
        sockaddr_ll at{};
        at.sll_family = AF_PACKET;
        at.sll_protocol = htons(ETH_P_ALL);
        at.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
        if (at.sll_ifindex == 0 || bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
            close(fd_);
            fd_ = -1;
            return;
        }
        thread_ = std::thread([this] { record(); });
    }
    ~LoopbackRecorder() { stop(); }
    LoopbackRecorder(const LoopbackRecorder&) = delete;
    LoopbackRecorder& operator=(const LoopbackRecorder&) = delete;

    bool usable() const { return fd_ >= 0; }
    std::vector<char> stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    void record() {
        std::vector<char> frame(1 << 17);
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 20) <= 0) continue;
            const ssize_t n = recv(fd_, frame.data(), frame.size(), MSG_DONTWAIT);
            if (n <= 0) continue;
            std::lock_guard lock(mutex_);
            seen_.insert(seen_.end(), frame.begin(), frame.begin() + n);
        }
    }
    int fd_ = -1;
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<char> seen_;
    std::thread thread_;
};

// The bytes of this process's ofi+shm regions, the servers' (conf-ofi-PID-N, the harness's
// listen names) and the clients' (bmi-PID-N), as the provider left them.
std::vector<char> shm_regions() {
    std::vector<char> all;
    const std::string pid = std::to_string(getpid()) + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("conf-ofi-" + pid, 0) != 0 && name.rfind("bmi-" + pid, 0) != 0) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
}

// Sends the pattern both ways in messages of every kind under `options` and returns what the
// provider carried (empty: nothing could be watched here).
std::vector<char> carried(const std::string& options, bool& watched) {
    const std::vector<char> payload = patterned(3 * 1024 * 1024 + 17);
    Pair pair = make_peers("ofi", options);
    const BMI_addr_t client = introduce(pair);
    if (provider() == "shm") {
        every_kind(pair, client, &payload);
        watched = true;
        return shm_regions();
    }
    if (provider() != "tcp") {
        // verbs: the traffic crosses an RDMA device, not an interface a packet socket reads.
        watched = false;
        every_kind(pair, client, &payload);
        return {};
    }
    LoopbackRecorder recorder;
    watched = recorder.usable();
    if (!watched) return {};
    every_kind(pair, client, &payload);
    return recorder.stop();
}

// A key holder of the test's own: a raw endpoint that runs the handshake through the kit as
// the method does, encrypting, and then sends records it may change or repeat on the way, as
// someone on the path would.
class KeyHolder {
public:
    KeyHolder(const std::string& server, const std::string& key_path)
        : endpoint_(server), server_(server) {
        support::keys::SharedKey key;
        REQUIRE(support::keys::load_key_file(key_path, key) == 0);
        gate_.use(std::move(key));
        gate_.set_encryption(method::kit::Encryption::require);
    }
    // hello with our cipher offer, the answer's proof checked, our proof sent, keys derived.
    bool handshake() {
        using namespace method::ofi;
        if (!endpoint_.usable()) return false;
        method::kit::KeyHandshake handshake(gate_);
        Hello hello;
        hello.features = gate_.offered();
        hello.name = endpoint_.fabric().name();
        hello.nonce = handshake.offer(
            gate_, server_,
            proven_text("", hello.limits, hello.numbers, endpoint_.fabric().token()));
        hello.cipher_fields = true;
        hello.features.ciphers = handshake.hello_ciphers();
        hello.public_key = handshake.hello_public_key();
        if (!endpoint_.send(Kind::hello, encode(hello))) return false;
        const auto body = endpoint_.await(Kind::answer, 10000);
        if (!body) return false;
        const auto answer = decode_answer(*body);
        if (!answer) return false;
        const auto step = handshake.check_answer(
            gate_, checked_features(answer->features, answer->cipher_fields), answer->nonce,
            proven_text(answer->stated, answer->limits, answer->numbers, endpoint_.last_token()),
            answer->proof, answer->public_key);
        if (step.refused()) return false;
        const auto* proof = reinterpret_cast<const std::byte*>(step.proof.data());
        if (!endpoint_.send(Kind::proof, {proof, proof + step.proof.size()})) return false;
        auto keys = handshake.take_traffic_keys();
        if (!keys) return false;
        records_ = std::make_unique<support::keys::NumberedRecords>(*keys, true, 1 << 20);
        return true;
    }
    // An unexpected message of `text` under tag 7 as a record; `flip` changes one bit of it
    // after sealing. The record's bytes, for a repeat.
    std::vector<std::byte> send_unexpected(const std::string& text, bool flip = false) {
        const std::uint64_t tag = method::ofi::control_tag(method::ofi::Kind::unexpected, 7);
        std::vector<std::byte> record(text.size() + support::keys::NumberedRecords::trailer_size);
        records_->seal(tag, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()},
                       reinterpret_cast<std::uint8_t*>(record.data()));
        if (flip) record[0] ^= std::byte{1};
        resend(record);
        return record;
    }
    // A large message of `size` bytes under BMI tag `bmi_tag`: an Rts record, then, once the
    // receiver's Cts came, its data sealed as the method seals it, with one bit of chunk
    // `changed` flipped. False if the Cts did not come or a send failed.
    bool send_large(bmi_msg_tag_t bmi_tag, std::size_t size, std::uint64_t changed) {
        using namespace method::ofi;
        using support::keys::SealedBulk;
        const std::uint32_t transfer = 77;
        const std::uint64_t record = records_->next_number();
        const Rts rts{size, transfer, 0};
        const std::uint64_t tag = control_tag(Kind::rts, bmi_tag);
        std::vector<std::byte> sealed_rts(sizeof rts +
                                          support::keys::NumberedRecords::trailer_size);
        records_->seal(tag, {reinterpret_cast<const std::uint8_t*>(&rts), sizeof rts},
                       reinterpret_cast<std::uint8_t*>(sealed_rts.data()));
        // Not waited for alone: the Cts may come while the Rts's completion is read.
        if (!endpoint_.send_tagged(tag, sealed_rts)) return false;
        if (!endpoint_.await(Kind::cts, 10000)) return false;
        const std::vector<std::uint8_t> plain(size, 0x42);
        SealedBulk bulk(records_->cipher(), records_->send_bulk_key(record), record, size);
        std::vector<std::byte> sealed(support::keys::sealed_size(size));
        auto* out = reinterpret_cast<std::uint8_t*>(sealed.data());
        for (std::uint64_t i = 0; i < bulk.chunks(); ++i)
            bulk.seal(i, plain.data() + SealedBulk::plain_offset(i), out);
        sealed[SealedBulk::sealed_offset(changed) + 5] ^= std::byte{1};
        for (std::size_t at = 0; at < sealed.size(); at += sealed_piece_bytes) {
            const std::size_t n = std::min(sealed_piece_bytes, sealed.size() - at);
            const std::vector<std::byte> piece(sealed.begin() + static_cast<std::ptrdiff_t>(at),
                                               sealed.begin() +
                                                   static_cast<std::ptrdiff_t>(at + n));
            if (!endpoint_.send_tagged(data_tag(transfer), piece)) return false;
        }
        return true;
    }
    // Reads what completed: rxm moves a large send's data only while its sender polls.
    void progress() { endpoint_.drain(0); }
    void resend(const std::vector<std::byte>& record) {
        resend_tagged(method::ofi::control_tag(method::ofi::Kind::unexpected, 7), record);
    }
    void resend_tagged(std::uint64_t tag, const std::vector<std::byte>& record) {
        const std::uint64_t goal = endpoint_.sends_done() + 1;
        REQUIRE(endpoint_.send_tagged(tag, record));
        REQUIRE(endpoint_.sends_end(goal));
    }

private:
    bmi::test::OfiRawEndpoint endpoint_;
    std::string server_;  // its listen address, which is its endpoint as the proofs bind it
    method::kit::KeyGate gate_{"bmi_ofi"};
    std::unique_ptr<support::keys::NumberedRecords> records_;
};

// Waits, while the server progresses, until its count of failed records reaches `count`.
bool records_failed_reach(Side& server, std::uint64_t count) {
    return ofi_stats_come_to(
        server, [&](const method::ofi::Stats& stats) { return stats.records_failed >= count; },
        10000);
}

// No unexpected message arrives at the server for `ms`.
bool no_unexpected_for(Side& server, int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        int outcount = 0;
        core::UnexpectedMessage got;
        REQUIRE(server.instance->testunexpected(10, outcount, std::span(&got, 1)) == 0);
        if (outcount != 0) {
            server.instance->unexpected_free(got.buffer);
            return false;
        }
    }
    return true;
}
}  // namespace

TEST_CASE("ofi: encrypted messages of every kind arrive intact", "[conformance][ofi][encryption]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = files.key("fs.key", 0x5a);
    SECTION("require") {
        Pair pair = make_peers("ofi", "key_file=" + key + ",encryption=require");
        const BMI_addr_t client = introduce(pair);
        every_kind(pair, client);
        CHECK(ofi_stats(pair.server).encrypted_peers == 1);
        CHECK(ofi_stats(pair.client).encrypted_peers == 1);
        CHECK(ofi_stats(pair.server).records_failed == 0);
    }
    SECTION("a new key every 3 records: many steps, each side at its own pace") {
        Pair pair =
            make_peers("ofi", "key_file=" + key + ",encryption=prefer,encryption_rekey_records=3");
        const BMI_addr_t client = introduce(pair);
        every_kind(pair, client);
        CHECK(ofi_stats(pair.server).encrypted_peers == 1);
        CHECK(ofi_stats(pair.client).records_failed == 0);
    }
}

TEST_CASE("ofi: the provider carries no readable pattern with encryption, and does without",
          "[conformance][ofi][encryption]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = files.key("fs.key", 0x5b);
    bool watched = false;
    const std::vector<char> plain = carried("key_file=" + key, watched);
    if (!watched) {
        WARN("the wire is not watched here (ofi+tcp needs CAP_NET_RAW for a packet socket on lo; "
             "ofi+verbs has no interface to read)");
        return;
    }
    REQUIRE_FALSE(plain.empty());
    CHECK(shows_pattern(plain));
    const std::vector<char> sealed = carried("key_file=" + key + ",encryption=require", watched);
    REQUIRE_FALSE(sealed.empty());
    CHECK_FALSE(shows_pattern(sealed));
}

TEST_CASE("ofi: require refuses a peer that cannot encrypt; prefer talks plainly with it",
          "[conformance][ofi][encryption]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = "key_file=" + files.key("fs.key", 0x5c);
    SECTION("the server requires, the client's encryption is off") {
        Pair pair = make_peers("ofi", key + ",encryption=require", key);
        const char byte = 'x';
        Pump server(*pair.server.instance);
        const auto sent = post_and_wait(
            pair.client, send_request(pair.client, pair.server_addr, &byte, 1, 1), 10000);
        CHECK(sent.error == -BMI_EACCES);
        CHECK(ofi_stats(pair.server).encrypted_peers == 0);
    }
    SECTION("the client requires, the server's encryption is off") {
        Pair pair = make_peers("ofi", key, key + ",encryption=require");
        const char byte = 'x';
        Pump server(*pair.server.instance);
        const auto sent = post_and_wait(
            pair.client, send_request(pair.client, pair.server_addr, &byte, 1, 1), 10000);
        CHECK(sent.error == -BMI_EACCES);
    }
    SECTION("the server prefers, the client's encryption is off") {
        Pair pair = make_peers("ofi", key + ",encryption=prefer", key);
        const BMI_addr_t client = introduce(pair);
        round_trip(pair, client, 100, 1, 7);
        CHECK(ofi_stats(pair.server).encrypted_peers == 0);
        CHECK(ofi_stats(pair.client).encrypted_peers == 0);
    }
}

TEST_CASE("ofi: a changed or repeated record drops its sender alone and delivers nothing",
          "[conformance][ofi][encryption]") {
    if (!scheme_compiled("ofi")) return;
    KeyFiles files;
    const std::string key = files.key("fs.key", 0x5d);
    Pair pair = make_peers("ofi", "key_file=" + key + ",encryption=require");
    const BMI_addr_t client = introduce(pair);
    const std::string listen = pair.server.instance->listen_addresses();
    Pump server(*pair.server.instance);

    SECTION("a changed bit") {
        KeyHolder holder(listen, key);
        REQUIRE(holder.handshake());
        // Its records are taken as they are sealed, so the failure below is the change alone.
        holder.send_unexpected("genuine");
        const core::UnexpectedMessage got = wait_unexpected(pair.server, 10000);
        REQUIRE(got.size == 7);
        CHECK(std::memcmp(got.buffer, "genuine", 7) == 0);
        pair.server.instance->unexpected_free(got.buffer);
        holder.send_unexpected("changed", true);
        CHECK(records_failed_reach(pair.server, 1));
        // Dropped: what it sends after the changed record is not taken either.
        holder.send_unexpected("after");
        CHECK(no_unexpected_for(pair.server, 300));
    }
    SECTION("a repeated record") {
        KeyHolder holder(listen, key);
        REQUIRE(holder.handshake());
        const auto record = holder.send_unexpected("once");
        const core::UnexpectedMessage got = wait_unexpected(pair.server, 10000);
        REQUIRE(got.size == 4);
        pair.server.instance->unexpected_free(got.buffer);
        holder.resend(record);
        CHECK(records_failed_reach(pair.server, 1));
        CHECK(no_unexpected_for(pair.server, 300));
    }
    SECTION("a changed chunk of a large message") {
        KeyHolder holder(listen, key);
        REQUIRE(holder.handshake());
        holder.send_unexpected("large next");
        const core::UnexpectedMessage got = wait_unexpected(pair.server, 10000);
        const BMI_addr_t from = got.addr;
        pair.server.instance->unexpected_free(got.buffer);
        // The changed chunk ends the receive and drops the holder, with its other pieces.
        std::vector<char> into(5 * support::keys::bulk_chunk + 1000);
        bmi_op_id_t id = 0;
        REQUIRE(pair.server.instance->post(recv_request(pair.server, from, into.data(),
                                                        static_cast<bmi_size_t>(into.size()), 21),
                                           id, nullptr) >= 0);
        REQUIRE(holder.send_large(21, into.size(), 2));
        // Polled until the receive ends, not until every piece left: the server takes none
        // after dropping the holder, and shm ends a send only once a receive took it.
        core::Completion done;
        int outcount = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (outcount == 0 && std::chrono::steady_clock::now() < until) {
            holder.progress();
            REQUIRE(pair.server.instance->test(id, pair.server.context, 10, outcount, done) == 0);
        }
        REQUIRE(outcount == 1);
        CHECK(done.error == -BMI_EPROTO);
        CHECK(ofi_stats(pair.server).records_failed == 1);
        // Dropped, as for a changed record.
        holder.send_unexpected("after");
        CHECK(no_unexpected_for(pair.server, 300));
    }
    // The legitimate client is served throughout.
    round_trip(pair, client, 3 * 1024 * 1024, 1, 11, nullptr, 30000);
    CHECK(ofi_stats(pair.client).records_failed == 0);
}

#endif
