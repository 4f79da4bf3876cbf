// SPDX-License-Identifier: LGPL-2.1-or-later
// Same-node offers over tcp (methods/kit/same_node.hpp, doc/methods/tcp.md "Same-node
// offers"): the acceptor's answer to a HELLO that asks for one, and the client's question,
// which a lookup asks outside every lock, on a connection of its own that carries no message.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "methods/tcp/tcp_key_features.hpp"
#include "methods/tcp/tcp_method.hpp"
#include "methods/tcp/tcp_method_impl.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

void TcpMethod::answer_same_node(Connection& c, Hello ack) {
    // The port the client dialled: the one its lookup named.
    using Answer = kit::SameNodeTickets::Answer;
    kit::SameNodeOffer offer;
    const Answer answer = same_node_ ? same_node_->answer(port_of(local_address(c.fd)), offer)
                                     : Answer::none;
    // The bit alone: ask again shortly (the listener is being started).
    if (answer != Answer::none) ack.features |= feature_same_node;
    if (answer == Answer::offer) ack.offer = std::move(offer);
    OutFrame reply;
    reply.body = encode_hello(ack, true, c.reader.header.magic);
    c.writer.control_queue.push_back(std::move(reply));
    flush(c);
    BMI_LOG(tcp, "tcp: %s asked for a same-node offer: %s", describe(c.remote).c_str(),
            answer == Answer::offer   ? "made"
            : answer == Answer::later ? "ask again, the listener is starting"
                                      : "none to make");
    // It carried no message and never will: no peer was made for it.
    fail_connection(c, 0, false);
}

namespace {

using Clock = std::chrono::steady_clock;

// Waits for `events` on fd until `deadline`: 0, or -BMI_ETIMEDOUT.
int wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return -BMI_ETIMEDOUT;
        pollfd p{fd, events, 0};
        const int n = poll(&p, 1, static_cast<int>(left.count()));
        if (n > 0) return 0;
        if (n < 0 && errno != EINTR) return support::bmi_error_from_errno(errno);
    }
}

// size bytes through a nonblocking socket by deadline, `step(done)` moving the next part (send
// or recv) and `ready` the poll event that lets it continue; 0 or -BMI_E*.
template <class Step>
int move_all(int fd, std::size_t size, short ready, Clock::time_point deadline, Step&& step) {
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = step(done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (int rc = wait_for(fd, ready, deadline); rc != 0) return rc;
        } else {
            return n < 0 ? support::bmi_error_from_errno(errno) : -BMI_ECONNRESET;
        }
    }
    return 0;
}

int write_all(int fd, const std::vector<std::uint8_t>& bytes, Clock::time_point deadline) {
    return move_all(fd, bytes.size(), POLLOUT, deadline, [&](std::size_t done) {
        return send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    });
}

int read_all(int fd, std::uint8_t* out, std::size_t size, Clock::time_point deadline) {
    return move_all(fd, size, POLLIN, deadline,
                    [&](std::size_t done) { return recv(fd, out + done, size - done, 0); });
}

// The question on a connected socket: HELLO with feature_same_node (and our key's nonce), then
// the answer, whose proof must check before its offer is believed.
int ask_on(int fd, kit::KeyGate& gate, Clock::time_point deadline, kit::SameNodeOffer& out) {
    kit::KeyHandshake handshake(gate);
    Hello hello{our_features | feature_same_node | feature_bits(gate.offered()), ""};
    if (handshake.keyed()) {
        hello.nonce = handshake.offer(gate, fd, hello_address(hello.address));
        hello.ciphers = handshake.hello_ciphers();
        hello.public_key = handshake.hello_public_key();
    }
    if (int rc = write_all(fd, encode_hello(hello, false), deadline); rc != 0) return rc;
    std::uint8_t head[legacy_header_size];
    if (int rc = read_all(fd, head, sizeof head, deadline); rc != 0) return rc;
    const Header header = decode_header(head, Framing::orangefs);
    if (header.magic != hello_magic || header.mode != Mode::hello_ack ||
        header.size < hello_fixed_size || header.size > hello_max_body)
        return -BMI_EPROTO;
    std::vector<std::uint8_t> body(static_cast<std::size_t>(header.size));
    if (int rc = read_all(fd, body.data(), body.size(), deadline); rc != 0) return rc;
    const std::optional<Hello> ack = decode_hello_body(body);
    if (!ack) return -BMI_EPROTO;
    const std::span<const std::uint8_t> proof =
        ack->proof ? std::span<const std::uint8_t>(*ack->proof) : std::span<const std::uint8_t>();
    const auto step = handshake.check_answer(gate, key_features(*ack), ack->nonce, ack->address,
                                             proof, ack->public_key);
    if (step.refused()) return -BMI_EACCES;
    if ((ack->features & feature_same_node) == 0) return -BMI_ENOPROTOOPT;
    if (!ack->offer) return -BMI_EAGAIN;
    out = *ack->offer;
    return 0;
}

constexpr std::chrono::milliseconds max_pause{32};
constexpr std::chrono::milliseconds longest_question{250};

int ask_once(const SocketAddress& target, kit::KeyGate& gate, SourcePorts& ports,
             Clock::time_point deadline, kit::SameNodeOffer& out) {
    const int fd = socket(target.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return support::bmi_error_from_errno(errno);
    // A server with trusted connections hears the question only from its trusted ports.
    int rc = ports.bind_source(fd, target, SocketAddress{});
    if (rc == 0 && connect(fd, target.get(), target.length) != 0) {
        rc = errno == EINPROGRESS ? wait_for(fd, POLLOUT, deadline)
                                  : support::bmi_error_from_errno(errno);
        if (rc == 0) rc = socket_error(fd);
    }
    if (rc == 0) rc = ask_on(fd, gate, deadline, out);
    close(fd);
    return rc;
}

}  // namespace

int ask_same_node(std::string_view address, const Config& config, kit::SameNodeOffer& out) {
    auto parsed = parse_tcp_address(address);
    if (!parsed) return -BMI_EINVAL;
    SocketAddress target;
    if (int rc = resolve(parsed->host, parsed->port, target); rc < 0) return rc;
    kit::KeyGate gate{"tcp"};
    support::keys::SharedKey key;
    if (int rc = support::keys::method_key(config.key, config.settings, key); rc < 0) return rc;
    gate.use(std::move(key));
    if (int rc = gate.load_encryption(config.settings); rc < 0) return rc;
    SourcePorts ports;
    if (int rc = source_ports_for(config, ports); rc < 0) return rc;
    // A lookup must not wait long on a server: one that does not answer this soon (busy, or
    // this very process between its test calls) is reached over tcp, as without the offer.
    const Clock::time_point deadline =
        Clock::now() + std::min<Clock::duration>(config.settings.duration(SettingId::setup_timeout),
                                                 longest_question);
    int rc = 0;
    // "Ask again" comes once, while the server's control layer starts its listener, which
    // takes it one pass of its progress loop.
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, max_pause)) {
        rc = ask_once(target, gate, ports, deadline, out);
        if (rc != -BMI_EAGAIN || Clock::now() + pause >= deadline) break;
        std::this_thread::sleep_for(pause);
    }
    BMI_LOG(tcp, "tcp: same-node offer from %s: %s", parsed->canonical.c_str(),
            rc == 0 ? out.shm_name.c_str() : "none");
    return rc;
}

}  // namespace bmi::method::tcp
