// SPDX-License-Identifier: LGPL-2.1-or-later
// A same-user peer that speaks the shm wire protocol by hand, so a test can send what no
// libbmi instance would: a pipe for a notifier, a record whose size lies, an oversized offer,
// a stream of messages nobody asked for. Everything it holds is closed by its destructor.
#pragma once

#include <cstdint>
#include <string>

#include "methods/shm/shm_doorbell.hpp"
#include "methods/shm/shm_segment.hpp"
#include "methods/shm/shm_wire.hpp"

namespace bmi::test {

// "\0libbmi-shm.<uid>.<name>", the listener's abstract socket name, and its length.
std::string abstract_socket_name(const std::string& name);

// A socket listening on the abstract name of shm listener `name` (a squatter, or a hostile
// listener), or -1.
int listen_as(const std::string& name);

// One message with descriptors by SCM_RIGHTS on a stream socket; true if all of it was sent.
bool send_with_rights(int socket, const void* data, std::size_t size, const int* fds, int fd_count);

class HostilePeer {
public:
    // Connects (blocking) to the shm listener `name`; check connected().
    explicit HostilePeer(const std::string& name);
    ~HostilePeer();
    HostilePeer(const HostilePeer&) = delete;
    HostilePeer& operator=(const HostilePeer&) = delete;

    bool connected() const { return fd_ >= 0; }
    // The listen name the next hello announces (none by default), whoever holds it.
    void announce(const std::string& name) { announced_ = name; }
    // Sends the hello of a fresh segment of this geometry with `notifier` as our notifier
    // (-1: a new eventfd of our own). True once sent.
    // With key_nonce, the hello offers a key proof under that nonce (a keyed initiator's).
    bool send_hello(std::uint32_t slot_count, std::uint32_t slot_size, int notifier = -1,
                    const std::uint8_t* key_nonce = nullptr);
    // Waits up to deadline_ms for the listener's answer: true for a reply (its notifier and
    // doorbell are kept), false when it closed the connection instead, refused us or said
    // nothing in time. The reply itself, a refusal included, goes to *out when given.
    bool await_reply(int deadline_ms, method::shm::HelloReply* out = nullptr);
    // Sends a KeyProof of `size` bytes (sizeof(KeyProof) for a well-formed one) whose proof
    // field is `proof`; true once sent.
    bool send_key_proof(const std::uint8_t* proof,
                        std::size_t size = sizeof(method::shm::KeyProof));
    // True once the listener closed the connection, within deadline_ms.
    bool await_close(int deadline_ms);

    // Publishes one ring message (header, then payload), rings the listener's doorbell and
    // wakes the listener. False when the ring has no room for it.
    bool publish(method::shm::MsgType type, std::int32_t tag, std::uint64_t size,
                 const void* payload, std::size_t payload_bytes, std::int32_t aux = 0);
    // Offers the memfd `fd` (not taken over) as our shared buffer at `address`, counted in
    // the segment so the listener reads it before it uses an announcement. True once sent.
    bool offer(int fd, std::uint64_t id, const void* address, std::uint64_t size);
    // Publishes a header whose slot count the caller chooses, whatever its size says.
    void publish_raw(const method::shm::MsgHeader& header);
    // True once the listener has published a message into our ring, within deadline_ms.
    bool message_within(int deadline_ms);
    // Free slots in our ring towards the listener.
    std::uint32_t free_slots() { return tx_.free_slots(); }
    // What a hostile process mapping the listener's doorbell can do: clear every bit in it,
    // its own and those other peers rang (after await_reply).
    void clear_listener_doorbell();
    int socket() const { return fd_; }

private:
    void wake_listener();

    int fd_ = -1;
    int own_notifier_ = -1;
    int listener_notifier_ = -1;
    method::shm::SharedSegment segment_;
    std::string announced_;
    method::shm::Ring tx_;
    method::shm::Ring rx_;
    method::shm::Doorbell own_bell_;
    method::shm::Doorbell listener_bell_;
    std::uint32_t listener_bell_index_ = 0;
    method::shm::DoorbellLayout* listener_layout_ = nullptr;  // the same, mapped raw
};

}  // namespace bmi::test
