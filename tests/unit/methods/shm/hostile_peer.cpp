// SPDX-License-Identifier: LGPL-2.1-or-later
// The hand-written shm peer of hostile_peer.hpp.
#include "hostile_peer.hpp"

#include "methods/shm/shm_region.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

namespace bmi::test {

using namespace method::shm;

std::string abstract_socket_name(const std::string& name) {
    return std::string(1, '\0') + "libbmi-shm." + std::to_string(getuid()) + "." + name;
}

bool send_with_rights(int socket, const void* data, std::size_t size, const int* fds,
                      int fd_count) {
    auto fd_bytes = static_cast<std::size_t>(fd_count) * sizeof(int);
    iovec iov{const_cast<void*>(data), size};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(fd_bytes);
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fd_bytes);
    std::memcpy(CMSG_DATA(c), fds, fd_bytes);
    return sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

namespace {
socklen_t address_of(const std::string& name, sockaddr_un& address) {
    std::string path = abstract_socket_name(name);
    address = {};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.data(), path.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
}
}  // namespace

int listen_as(const std::string& name) {
    sockaddr_un address;
    socklen_t length = address_of(name, address);
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&address), length) == 0 && listen(s, 4) == 0)
        return s;
    if (s >= 0) close(s);
    return -1;
}

HostilePeer::HostilePeer(const std::string& name) {
    sockaddr_un address;
    socklen_t length = address_of(name, address);
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&address), length) == 0) {
        fd_ = s;
    } else if (s >= 0) {
        close(s);
    }
}

HostilePeer::~HostilePeer() {
    for (int fd : {fd_, own_notifier_, listener_notifier_})
        if (fd >= 0) close(fd);
    if (listener_layout_ != nullptr) munmap(listener_layout_, sizeof(DoorbellLayout));
}

bool HostilePeer::send_hello(std::uint32_t slot_count, std::uint32_t slot_size, int notifier,
                             const std::uint8_t* key_nonce) {
    if (segment_.create(slot_count, slot_size) != 0 || own_bell_.create() != 0) return false;
    tx_ = segment_.ring(0);
    rx_ = segment_.ring(1);
    if (notifier < 0) notifier = own_notifier_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    Hello hello{};
    hello.magic = hello_magic;
    hello.version = protocol_version;
    hello.slot_count = slot_count;
    hello.slot_size = slot_size;
    hello.pid = static_cast<std::int32_t>(getpid());
    hello.nonce = 0x686f7374696c65;
    hello.unexpected_limit = default_unexpected_limit;
    if (announced_.size() > sizeof hello.name) return false;
    hello.name_length = static_cast<std::uint32_t>(announced_.size());
    std::memcpy(hello.name, announced_.data(), announced_.size());
    if (key_nonce != nullptr) {
        hello.features = feature_key_proof | feature_key_binding;
        std::memcpy(hello.key_nonce, key_nonce, key_bytes);
    }
    int fds[3] = {segment_.fd(), notifier, own_bell_.fd()};
    bool sent = send_with_rights(fd_, &hello, sizeof hello, fds, 3);
    segment_.close_fd();
    return sent;
}

bool HostilePeer::await_reply(int deadline_ms, HelloReply* out) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, deadline_ms) != 1) return false;
    HelloReply reply{};
    iovec iov{&reply, sizeof reply};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    if (recvmsg(fd_, &message, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof reply))
        return false;
    if (out != nullptr) *out = reply;  // a refusal (no descriptors) included
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return false;
    int fds[2];
    std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    listener_notifier_ = fds[0];
    listener_layout_ = static_cast<DoorbellLayout*>(
        mmap(nullptr, sizeof(DoorbellLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0));
    if (listener_layout_ == MAP_FAILED) listener_layout_ = nullptr;
    if (listener_bell_.attach(fds[1]) != 0) return false;
    listener_bell_index_ = reply.doorbell_index;
    return reply.status == 0;
}

bool HostilePeer::send_key_proof(const std::uint8_t* proof, std::size_t size) {
    // Room for an oversized proof: the well-formed message and as much again.
    std::uint8_t bytes[2 * sizeof(KeyProof)] = {};
    KeyProof message{};
    message.magic = hello_magic;
    message.version = protocol_version;
    std::memcpy(message.proof, proof, key_bytes);
    std::memcpy(bytes, &message, sizeof message);
    if (size > sizeof bytes) return false;
    return send(fd_, bytes, size, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

bool HostilePeer::await_close(int deadline_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
        char scratch[256];
        ssize_t n = recv(fd_, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
}

bool HostilePeer::publish(MsgType type, std::int32_t tag, std::uint64_t size, const void* payload,
                          std::size_t payload_bytes, std::int32_t aux) {
    std::uint32_t slots = tx_.slots_for(header_size + payload_bytes);
    if (!tx_.has_room(slots)) return false;
    Window w = tx_.claim(slots);
    MsgHeader header{static_cast<std::uint32_t>(type), tag, slots, aux, size, 1};
    w.write(0, &header, sizeof header);
    if (payload_bytes > 0) w.write(header_size, payload, payload_bytes);
    tx_.publish(slots);
    wake_listener();
    return true;
}

bool HostilePeer::message_within(int deadline_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    while (!rx_.has_message()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void HostilePeer::publish_raw(const MsgHeader& header) {
    Window w = tx_.claim(header.slots);
    w.write(0, &header, sizeof header);
    tx_.publish(header.slots);
    wake_listener();
}

bool HostilePeer::offer(int fd, std::uint64_t id, const void* address, std::uint64_t size) {
    RegionMessage message{region_offer, 0, id, reinterpret_cast<std::uintptr_t>(address), size};
    if (!send_with_rights(fd_, &message, sizeof message, &fd, 1)) return false;
    segment_.socket_messages(0)->fetch_add(1, std::memory_order_release);
    return true;
}

void HostilePeer::clear_listener_doorbell() {
    if (listener_layout_ == nullptr) return;
    for (auto& word : listener_layout_->summary) word.store(0);
    for (auto& word : listener_layout_->bits) word.store(0);
}

void HostilePeer::wake_listener() {
    if (listener_bell_.mapped()) listener_bell_.ring(listener_bell_index_);
    std::uint64_t one = 1;
    if (listener_notifier_ >= 0) (void)!write(listener_notifier_, &one, sizeof one);
}

}  // namespace bmi::test
