// SPDX-License-Identifier: LGPL-2.1-or-later
// The per-method adapters of the shared peer rules: tcp and verbs bootstrap over a TCP socket,
// shm over its listener's Unix socket (the hand-written peer of tests/unit/methods/shm).
#include "attacker.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "methods/method.hpp"
#include "methods/method_config.hpp"
#include "raw_socket.hpp"
#include "support/keys/key_proof.hpp"
#if BMI_METHOD_TCP
#include "methods/tcp/tcp_wire.hpp"
#endif
#if BMI_METHOD_SHM
#include "hostile_peer.hpp"
#endif
#if BMI_METHOD_VERBS
#include "methods/verbs/verbs_method.hpp"
#include "verbs_raw_peer.hpp"
#endif
#if BMI_METHOD_OFI
#include <rdma/fi_errno.h>

#include "ofi_stats.hpp"

#include <chrono>
#include <deque>
#include <vector>

#include "methods/ofi/ofi_handshake.hpp"
#include "methods/ofi/ofi_wire.hpp"
#include "ofi_raw_endpoint.hpp"
#endif

namespace bmi::test {

namespace {

#if BMI_METHOD_TCP
// tcp's keyed path only: the keyless first frames are the legacy interoperation's business.
class TcpAttacker final : public RawAttacker {
public:
    explicit TcpAttacker(const std::string& address) : fd_(connect_to(address)) {}
    ~TcpAttacker() override {
        if (fd_ >= 0) close(fd_);
    }
    bool connected() const override { return fd_ >= 0; }
    bool send_keyed_hello(int deadline_ms, const std::string& announced) override {
        using namespace method::tcp;
        Hello hello{feature_rendezvous | feature_key_proof | feature_key_binding |
                        feature_key_ciphers,
                    announced};
        hello.nonce = support::keys::fresh_nonce();
        const auto frame = encode_hello(hello, false);
        if (send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(frame.size()))
            return false;
        pollfd p{fd_, POLLIN, 0};
        char first;
        return poll(&p, 1, deadline_ms) == 1 && recv(fd_, &first, 1, MSG_PEEK) == 1;
    }
    bool closed_within(int deadline_ms) override {
        return bmi::test::closed_within(fd_, deadline_ms);
    }

private:
    int fd_;
};
#endif

#if BMI_METHOD_SHM
class ShmAttacker final : public RawAttacker {
public:
    explicit ShmAttacker(const std::string& address) : peer_(address.substr(6)) {}
    bool connected() const override { return peer_.connected(); }
    bool send_keyed_hello(int deadline_ms, const std::string& announced) override {
        if (!announced.empty()) peer_.announce(announced.substr(6));
        const support::keys::Nonce nonce = support::keys::fresh_nonce();
        return peer_.send_hello(16, 4096, -1, nonce.data()) && peer_.await_reply(deadline_ms);
    }
    bool closed_within(int deadline_ms) override { return peer_.await_close(deadline_ms); }

private:
    HostilePeer peer_;
};
#endif

#if BMI_METHOD_VERBS
class VerbsAttacker final : public RawAttacker {
public:
    explicit VerbsAttacker(const std::string& address) {
        dialled_ = peer_.usable() && peer_.dial(address);
    }
    bool connected() const override { return dialled_; }
    bool send_keyed_hello(int deadline_ms, const std::string& announced) override {
        method::verbs::Hello mine = peer_.own_hello(announced);
        mine.features = method::verbs::feature_key_proof | method::verbs::feature_key_binding |
                        method::verbs::feature_key_ciphers;
        const support::keys::Nonce nonce = support::keys::fresh_nonce();
        std::memcpy(mine.nonce, nonce.data(), sizeof mine.nonce);
        method::verbs::Hello answer;
        return peer_.send_bytes(&mine, sizeof mine) && peer_.read_hello(answer, deadline_ms);
    }
    bool closed_within(int deadline_ms) override { return peer_.closed_by_server(deadline_ms); }

private:
    verbs::RawPeer peer_;
    bool dialled_ = false;
};
#endif

#if BMI_METHOD_OFI
// The peer rules' attacker on ofi: a raw endpoint of its own (ofi_raw_endpoint.hpp).
class OfiAttacker final : public RawAttacker {
public:
    explicit OfiAttacker(const std::string& address) : endpoint_(address) {}
    bool connected() const override { return endpoint_.usable(); }
    bool send_keyed_hello(int deadline_ms, const std::string& announced) override {
        using namespace method::ofi;
        Hello hello;
        hello.features.proof = true;
        hello.features.binding = true;
        hello.name = endpoint_.fabric().name();
        hello.nonce = support::keys::fresh_nonce();
        hello.cipher_fields = true;  // as a keyed libbmi sends it, offering no cipher
        hello.stated = announced;
        return endpoint_.send(Kind::hello, encode(hello)) &&
               endpoint_.await(Kind::answer, deadline_ms).has_value();
    }
    // rxm keeps its connection after the listener drops our handshake: there is no close to
    // see (MethodAdapter::unproven_held sees the drop).
    bool closed_within(int) override { return false; }
    bool send_unasked_data(int count, std::size_t bytes) override {
        unasked_.assign(bytes, std::byte{0x5a});
        void* desc = nullptr;
        if (!endpoint_.describe(unasked_.data(), unasked_.size(), desc)) return false;
        int sent = 0;
        const std::uint64_t done_before = endpoint_.sends_done();
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (sent < count && std::chrono::steady_clock::now() < until) {
            // Transfer ids no clear-to-send named; the provider only reads the one buffer.
            auto& context = unasked_contexts_.emplace_back();
            const auto rc = fi_tsend(
                endpoint_.fabric().ep(), unasked_.data(), unasked_.size(), desc, endpoint_.server(),
                method::ofi::data_tag(0x7000 + static_cast<unsigned>(sent)), &context);
            if (rc == 0) {
                ++sent;
                continue;
            }
            unasked_contexts_.pop_back();
            if (rc != -FI_EAGAIN) return false;
            endpoint_.drain(0);
        }
        // Manual progress: the data leaves only while we read our queue.
        return endpoint_.sends_end(done_before + static_cast<std::uint64_t>(sent)) && sent == count;
    }
    bool send_ignoring_credits(int count, std::size_t bytes) override {
        using namespace method::ofi;
        if (!greet()) return false;
        const std::uint64_t goal = endpoint_.sends_done() + static_cast<std::uint64_t>(count);
        const std::vector<std::byte> body(bytes, std::byte{0x33});
        for (int i = 0; i < count; ++i)
            if (!endpoint_.send(Kind::eager, body, static_cast<std::uint32_t>(40 + i)))
                return false;
        return endpoint_.sends_end(goal);
    }
    bool send_grants(int count) override {
        using namespace method::ofi;
        if (!greet()) return false;
        const std::uint64_t goal = endpoint_.sends_done() + static_cast<std::uint64_t>(count);
        for (int i = 0; i < count; ++i) {
            // seen 0: the listener has sent us nothing, so it may keep each one.
            const Grant grant{std::uint64_t{1} << 20, 0, static_cast<std::uint32_t>(i + 1), 0};
            const auto* bytes = reinterpret_cast<const std::byte*>(&grant);
            if (!endpoint_.send(Kind::grant, std::vector<std::byte>(bytes, bytes + sizeof grant),
                                static_cast<std::uint32_t>(100 + i)))
                return false;
        }
        return endpoint_.sends_end(goal);
    }

private:
    // A keyless hello, answered: the listener takes what we send after it as a peer's.
    bool greet() {
        using namespace method::ofi;
        if (greeted_) return true;
        Hello hello;
        hello.name = endpoint_.fabric().name();
        greeted_ = endpoint_.send(Kind::hello, encode(hello)) &&
                   endpoint_.await(Kind::answer, 5000).has_value();
        return greeted_;
    }

    // Declared first, so they outlive the endpoint, whose close ends their sends.
    std::vector<std::byte> unasked_;  // send_unasked_data's one body
    std::deque<fi_context2> unasked_contexts_;
    OfiRawEndpoint endpoint_;
    bool greeted_ = false;  // send_ignoring_credits' handshake is done
};
#endif

const std::array adapters{
    MethodAdapter{"tcp", true, true, true, "", "", "", "", false,
                  "a peer's bytes wait in its socket until the method reads them: there are "
                  "no credits to send past",
                  "a cancel of a transfer that moved part of a message closes its connection "
                  "(OrangeFS's cancel mode, doc/methods/tcp.md)"},
    MethodAdapter{"shm", true, false, false, "", "", "", "", false,
                  "a peer writes only into the free slots of its ring: there are no credits "
                  "to send past",
                  "a cancel of a transfer in flight, other than a split receive, closes the "
                  "connection (doc/methods/shm.md)"},
    MethodAdapter{"verbs", false, true, true, "", "",
                  "the sender cannot see the receiver's RDMA READs (its device serves them "
                  "without its process), so a transfer the receiver started and stopped ends "
                  "at the rendezvous deadline (no FIN), not the stall deadline",
                  "", false,
                  "checked by the verbs suite (verbs_hostile_test, \"sending past the granted "
                  "credits\"), whose raw peer completes the handshake this attacker stops at",
                  "a receive whose READs are in flight ends cancelled once they are done, and "
                  "its sender's send succeeds (doc/methods/verbs.md)"},
    MethodAdapter{"ofi", false, true, false, "",
                  "rxm opens and keeps the connections beneath an endpoint itself; libbmi holds "
                  "no descriptor per peer to shed (each unproven hello costs an address-vector "
                  "entry instead, bounded per host by ofi_pending_per_source)",
                  "",
                  "an endpoint sends nothing before its hello, and what rxm connects for a "
                  "message from an unknown source is the provider's: libbmi holds nothing of a "
                  "silent peer, so there is nothing to close at the setup deadline",
                  true, "", ""},
};

}  // namespace

SilentListener::SilentListener(const std::string& scheme, std::uint16_t wanted) {
#if BMI_METHOD_SHM
    if (scheme == "shm") {
        // shm's listener is the abstract Unix socket its name maps to.
        const std::string name = "silent-" + std::to_string(getpid()) + "-" +
                                 std::to_string(reinterpret_cast<std::uintptr_t>(this));
        const std::string path = abstract_socket_name(name);
        sockaddr_un at{};
        at.sun_family = AF_UNIX;
        std::memcpy(at.sun_path, path.data(), path.size());
        listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
        REQUIRE(listener_ >= 0);
        REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&at), length) == 0);
        REQUIRE(listen(listener_, 16) == 0);
        address_ = "shm://" + name;
        return;
    }
#endif
    // tcp's and verbs' handshakes begin on a TCP connection.
    std::uint16_t port = 0;
    listener_ = bind_on_loopback(port, 0, true, wanted);
    REQUIRE(listener_ >= 0);
    address_ = scheme + "://127.0.0.1:" + std::to_string(port);
}

SilentListener::~SilentListener() {
    if (listener_ >= 0) close(listener_);
}

ClosedAddress::ClosedAddress(const std::string& scheme) {
    if (scheme == "shm") {
        address_ = "shm://closed-" + std::to_string(getpid()) + "-" +
                   std::to_string(reinterpret_cast<std::uintptr_t>(this));
        return;
    }
    std::uint16_t port = 0;
    socket_ = bind_on_loopback(port, 0, false);
    REQUIRE(socket_ >= 0);
    address_ = scheme + "://127.0.0.1:" + std::to_string(port);
}

ClosedAddress::~ClosedAddress() {
    if (socket_ >= 0) close(socket_);
}

Relay::Relay(const std::string& scheme, const std::string& target) : target_(target) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof at;
    REQUIRE(listener_ >= 0);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    REQUIRE(listen(listener_, 4) == 0);
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &length) == 0);
    address_ = scheme + "://127.0.0.1:" + std::to_string(ntohs(at.sin_port));
    thread_ = std::thread([this] { run(); });
}

Relay::~Relay() {
    stop_ = true;
    thread_.join();
    close(listener_);
}

void Relay::run() {
    int ends[2] = {-1, -1};  // the victim's connection, ours to the target
    while (!stop_ && ends[0] < 0) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, 20) == 1) ends[0] = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (ends[0] >= 0) ends[1] = connect_to(target_);
    while (!stop_ && ends[0] >= 0 && ends[1] >= 0) {
        pollfd p[2] = {{ends[0], POLLIN, 0}, {ends[1], POLLIN, 0}};
        if (poll(p, 2, 20) <= 0) continue;
        bool open = true;
        for (int i = 0; i < 2 && open; ++i) {
            if (p[i].revents == 0) continue;
            char bytes[4096];
            const ssize_t n = recv(ends[i], bytes, sizeof bytes, 0);
            open = n > 0 &&
                   send(ends[1 - i], bytes, static_cast<std::size_t>(n), MSG_NOSIGNAL) == n;
        }
        if (!open) break;
    }
    for (int fd : ends)
        if (fd >= 0) close(fd);
}

// Every method names a concept alike (doc/SETTINGS.md), so the key is the scheme's prefix on
// one name; a method without the row fails here rather than at BMI_initialize.
std::string MethodAdapter::scheme_option(std::string_view name, std::size_t value) const {
    const std::string key = scheme + "_" + std::string(name);
    if (method::all_settings().find(key) == nullptr) FAIL("no setting " << key);
    return key + "=" + std::to_string(value);
}

std::string MethodAdapter::setup_deadline_option(int ms) const {
    return scheme_option("setup_timeout_ms", static_cast<std::size_t>(ms));
}

std::string MethodAdapter::early_peer_option(std::size_t bytes) const {
    return scheme_option("early_peer_bytes", bytes);
}

std::optional<std::uint64_t> MethodAdapter::early_bytes_held(
    [[maybe_unused]] core::Instance& server, [[maybe_unused]] BMI_addr_t any) const {
#if BMI_METHOD_VERBS
    if (scheme == "verbs") {
        method::verbs::Stats stats;
        REQUIRE(server.get_info(any, method::verbs::get_stats_option, &stats) == 0);
        return stats.early_bytes;
    }
#endif
#if BMI_METHOD_OFI
    if (scheme == "ofi") return ofi_stats(server, any).early_bytes;
#endif
    return std::nullopt;
}

std::optional<std::uint64_t> MethodAdapter::unproven_held(
    [[maybe_unused]] core::Instance& server) const {
#if BMI_METHOD_OFI
    if (scheme == "ofi") return ofi_stats(server).unproven;
#endif
    return std::nullopt;
}

std::optional<std::uint64_t> MethodAdapter::spare_buffers(
    [[maybe_unused]] core::Instance& server) const {
#if BMI_METHOD_OFI
    if (scheme == "ofi") return ofi_stats(server).spare_buffers;
#endif
    return std::nullopt;
}

std::optional<std::uint64_t> MethodAdapter::sent_under_grant(
    [[maybe_unused]] core::Instance& client) const {
#if BMI_METHOD_OFI
    if (scheme == "ofi") return ofi_stats(client).sent_under_grant;
#endif
    return std::nullopt;
}

std::optional<std::uint64_t> MethodAdapter::grants_held(
    [[maybe_unused]] core::Instance& server) const {
#if BMI_METHOD_OFI
    if (scheme == "ofi") return ofi_stats(server).grants_held;
#endif
    return std::nullopt;
}

std::optional<std::uint64_t> MethodAdapter::unasked_dropped([[maybe_unused]] core::Instance& server,
                                                            std::string& why) const {
#if BMI_METHOD_OFI
    if (scheme == "ofi") {
        const method::ofi::Stats stats = ofi_stats(server);
        if (server.listen_addresses().rfind("ofi+shm:", 0) != 0) return stats.unasked_dropped;
        why = "its provider (shm) takes the entries of its unexpected queue from a fixed pool; "
              "past it a sender's messages wait in the sender's own queue";
        return std::nullopt;
    }
#endif
    why = "the method takes every message off its sockets, rings or posted receives itself: "
          "nothing beneath it keeps one";
    return std::nullopt;
}

std::string MethodAdapter::per_source_option(int handshakes) const {
    // A method without the bound has no row; "" tells the caller so.
    if (method::all_settings().find(scheme + "_pending_per_source") == nullptr) return {};
    return scheme_option("pending_per_source", static_cast<std::size_t>(handshakes));
}

int MethodAdapter::idle_connection(const std::string& listen_address) const {
#if BMI_METHOD_SHM
    if (scheme == "shm") {
        const std::string path = abstract_socket_name(listen_address.substr(6));
        sockaddr_un at{};
        at.sun_family = AF_UNIX;
        std::memcpy(at.sun_path, path.data(), path.size());
        const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
        if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&at), length) == 0) return fd;
        if (fd >= 0) close(fd);
        return -1;
    }
#endif
    // One at a time, each given a second to connect, so that no SYN is dropped and retried
    // later.
    auto parts = support::split_scheme(listen_address);
    auto hp = parts ? support::parse_host_port(parts->rest) : std::nullopt;
    if (!hp) return -1;
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(hp->port);
    if (inet_pton(AF_INET, hp->host.c_str(), &at.sin_addr) != 1) return -1;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, 1000);
    }
    return fd;
}

std::unique_ptr<RawAttacker> MethodAdapter::attack(const std::string& listen_address) const {
#if BMI_METHOD_TCP
    if (scheme == "tcp") return std::make_unique<TcpAttacker>(listen_address);
#endif
#if BMI_METHOD_SHM
    if (scheme == "shm") return std::make_unique<ShmAttacker>(listen_address);
#endif
#if BMI_METHOD_VERBS
    if (scheme == "verbs") return std::make_unique<VerbsAttacker>(listen_address);
#endif
#if BMI_METHOD_OFI
    if (scheme == "ofi") return std::make_unique<OfiAttacker>(listen_address);
#endif
    FAIL("no raw attacker for " << scheme << " (" << listen_address << ")");
    return nullptr;
}

const MethodAdapter& adapter_for(const std::string& scheme) {
    for (const auto& a : adapters)
        if (a.scheme == scheme) return a;
    FAIL("no peer-rule adapter for method " << scheme << ": add one to attacker.cpp");
    return adapters[0];
}

}  // namespace bmi::test
