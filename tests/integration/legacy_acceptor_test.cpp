// SPDX-License-Identifier: LGPL-2.1-or-later
// A libbmi client (a separate process) against an acceptor that reads tcp headers the way
// OrangeFS's bmi_tcp does: it checks the magic and nothing else, and keeps only the low 32 bits
// of the 64-bit tag field. Any header with magic 51903 is a message to it; one whose mode it
// does not know becomes a receive that later completes with BMI_EFAULT (the "ghost" an OrangeFS
// server logs as a critical BMI failure). Any other magic closes the connection and is logged
// ("bad magic in BMI TCP message"). The client must cause neither, use one connection, and
// deliver both ways in legacy framing.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "legacy_acceptor.h"
#include "process_harness.hpp"

using namespace std::chrono_literals;
using bmi::integration::Process;
using bmi::integration::program_from_env;

namespace {

constexpr std::uint32_t legacy_magic = 51903;
constexpr std::uint32_t mode_unexpected = 2, mode_eager = 4, mode_rendezvous = 8;
constexpr std::uint64_t orangefs_message_limit = 16u << 20;

void put_le(std::uint8_t* p, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t get_le(const std::uint8_t* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Owns one descriptor; closes it on every path out of a test.
struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// Reads exactly size bytes within the socket's receive timeout; false on EOF, error or timeout.
bool read_all(int fd, std::uint8_t* out, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
        ssize_t n = recv(fd, out + done, size - done, 0);
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

bool is_legacy_mode(std::uint32_t mode) {
    return mode == mode_unexpected || mode == mode_eager || mode == mode_rendezvous;
}

struct Message {
    int connection = 0;  // 1 for the first connection accepted
    std::uint32_t mode = 0;
    std::vector<std::uint8_t> payload;
};

class OrangefsLikeAcceptor {
public:
    OrangefsLikeAcceptor() : listener_(socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(bind(listener_.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        REQUIRE(listen(listener_.fd, 4) == 0);
        socklen_t len = sizeof sa;
        getsockname(listener_.fd, reinterpret_cast<sockaddr*>(&sa), &len);
        port_ = ntohs(sa.sin_port);
    }

    std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

    // Serves connections one after another until `wanted` legacy messages arrived (then
    // answers with one OrangeFS EAGER frame and reads until the client leaves) or no client
    // connects for 10 s.
    void serve(std::size_t wanted) {
        wanted_ = wanted;
        while (legacy_messages() < wanted) {
            pollfd p{listener_.fd, POLLIN, 0};
            if (poll(&p, 1, 10000) != 1) return;
            Fd conn(accept(listener_.fd, nullptr, nullptr));
            if (conn.fd < 0) return;
            timeval timeout{10, 0};
            setsockopt(conn.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
            ++connections;
            serve_connection(conn.fd);
        }
    }

    std::size_t legacy_messages() const {
        std::size_t n = 0;
        for (const Message& m : messages) n += is_legacy_mode(m.mode);
        return n;
    }

    int connections = 0;
    int rejected = 0;  // connections closed at the magic check: OrangeFS logs "bad magic"
    std::map<std::int32_t, Message> by_tag;  // by the tag as OrangeFS decodes it
    std::vector<Message> messages;           // every magic-51903 header, in arrival order

private:
    void serve_connection(int fd) {
        std::uint8_t header[24];
        while (read_all(fd, header, sizeof header)) {
            if (get_le(header, 4) != legacy_magic) {
                ++rejected;
                return;
            }
            Message m;
            m.connection = connections;
            m.mode = static_cast<std::uint32_t>(get_le(header + 4, 4));
            // OrangeFS reads the field as 64 bits and keeps the int32 tag of its low half.
            const auto tag = static_cast<std::int32_t>(get_le(header + 8, 8) & 0xffffffffu);
            const std::uint64_t size = get_le(header + 16, 8);
            if (size > orangefs_message_limit) return;
            m.payload.resize(size);
            const bool whole = read_all(fd, m.payload.data(), size);
            messages.push_back(m);
            by_tag[tag] = m;
            // OrangeFS fails the invented receive of an unknown mode and closes.
            if (!whole || !is_legacy_mode(m.mode)) return;
            if (legacy_messages() == wanted_ && !replied_) {
                reply(fd);
                replied_ = true;
            }
        }
    }

    void reply(int fd) {
        std::vector<std::uint8_t> frame(24 + LA_SIZE_REPLY);
        put_le(frame.data(), legacy_magic, 4);
        put_le(frame.data() + 4, mode_eager, 4);
        // Sign-extended, as OrangeFS writes a tag.
        put_le(frame.data() + 8, static_cast<std::uint64_t>(std::int64_t{LA_TAG_REPLY}), 8);
        put_le(frame.data() + 16, LA_SIZE_REPLY, 8);
        for (std::size_t i = 0; i < LA_SIZE_REPLY; ++i)
            frame[24 + i] = static_cast<std::uint8_t>((i * 7 + LA_TAG_REPLY) & 0xff);
        REQUIRE(send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(frame.size()));
    }

    std::size_t wanted_ = 0;
    bool replied_ = false;

    Fd listener_;
    std::uint16_t port_ = 0;
};

bool payload_intact(const Message& m, int tag, std::size_t size) {
    if (m.payload.size() != size) return false;
    for (std::size_t i = 0; i < size; ++i)
        if (m.payload[i] != static_cast<std::uint8_t>((i * 7 + static_cast<unsigned>(tag)) & 0xff))
            return false;
    return true;
}

}  // namespace

TEST_CASE("an OrangeFS-like acceptor gets legacy frames on one connection, no bad magic",
          "[integration]") {
    OrangefsLikeAcceptor acceptor;
    Process client =
        Process::spawn({program_from_env("BMI_LEGACY_ACCEPTOR_CLIENT"), acceptor.address()});
    acceptor.serve(3);
    auto status = client.wait(20s);
    REQUIRE(status);
    INFO("client said: " << client.unread_output());
    CHECK(*status == 0);

    // Nothing failed the magic check (OrangeFS would have logged it and closed), nothing
    // became a ghost receive, and one connection carried it all.
    CHECK(acceptor.rejected == 0);
    CHECK(acceptor.connections == 1);
    for (const Message& m : acceptor.messages) {
        INFO("mode 0x" << std::hex << m.mode << " on connection " << std::dec << m.connection);
        CHECK(m.connection == 1);
        CHECK(is_legacy_mode(m.mode));
    }
    REQUIRE(acceptor.messages.size() == 3);
    CHECK(acceptor.by_tag[LA_TAG_UNEXPECTED].mode == mode_unexpected);
    CHECK(acceptor.by_tag[LA_TAG_EAGER].mode == mode_eager);
    CHECK(acceptor.by_tag[LA_TAG_LARGE].mode == mode_rendezvous);
    CHECK(
        payload_intact(acceptor.by_tag[LA_TAG_UNEXPECTED], LA_TAG_UNEXPECTED, LA_SIZE_UNEXPECTED));
    CHECK(payload_intact(acceptor.by_tag[LA_TAG_EAGER], LA_TAG_EAGER, LA_SIZE_EAGER));
    CHECK(payload_intact(acceptor.by_tag[LA_TAG_LARGE], LA_TAG_LARGE, LA_SIZE_LARGE));
}
