// SPDX-License-Identifier: LGPL-2.1-or-later
// What the two sides say on the socket before the rings carry messages: the hello, its reply
// and, with a key, the initiator's proof (shm_wire.hpp; the key handshake is the kit's,
// methods/kit/key_handshake.hpp).
//
// Its own object because it holds all that we tell a peer about ourselves (listen name,
// nonce, ring geometry, the descriptors it maps) and the key gate that decides whom we
// believe; the method keeps what a hello does to its tables (binding a peer, the doorbell).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "methods/kit/key_handshake.hpp"
#include "methods/kit/same_node.hpp"
#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/keys/secret_key.hpp"

namespace bmi::method::shm {

class ShmHellos {
public:
    explicit ShmHellos(const Options& options);

    // Admits only peers that prove this key from now on (before start(); empty: keyless).
    void use_key(support::keys::SharedKey key) { keys_.use(std::move(key)); }
    bool keyed() const { return keys_.keyed(); }
    // A new connection's handshake, keyed or not as we are.
    kit::KeyHandshake handshake() { return kit::KeyHandshake(keys_); }
    // What every hello and reply hands over: the eventfd peers write to wake us and our
    // doorbell; and our listen name, once we listen ("": none).
    void introduce(int event_fd, int bell_fd) {
        event_fd_ = event_fd;
        bell_fd_ = bell_fd;
    }
    void listen_as(const std::string& name) { listen_name_ = name; }
    const std::string& listen_name() const { return listen_name_; }
    // A same-node listener (methods/kit/same_node.hpp): from now on only hellos that show one
    // of these tickets get in, whatever else they prove.
    void admit_tickets_only(std::shared_ptr<kit::SameNodeTickets> tickets) {
        tickets_ = std::move(tickets);
    }
    bool tickets_only() const { return tickets_ != nullptr; }
    // What our replies carry, and a ticket's holder checks against its offer.
    std::uint64_t nonce() const { return nonce_; }

    // Initiator: sends the hello (with our key offer), the segment and our descriptors; the
    // connection then awaits the reply. 0 or the error to close it with.
    int send_hello(Connection& conn);
    // Initiator: whether the reply admits us (keyed: its proof checks, and ours is sent).
    int check_reply(Connection& conn, const HelloReply& reply);

    // Acceptor: 0 if the hello's key features may go on, else the error to close it with (a
    // keyless libbmi peer is told why first).
    int check_hello(Connection& conn, const Hello& hello);
    // Acceptor, keyless: the reply with our descriptors; false if the initiator is gone.
    bool send_reply(const Connection& conn);
    // Acceptor, keyed: the reply with our nonce and proof; the connection then awaits the
    // initiator's proof. 0 or the error to close it with.
    int answer_keyed_hello(Connection& conn, const Hello& hello);
    // Acceptor, keyed: 0 while the proof has not come, 1 once it checks, else the error to
    // close the connection with.
    int receive_proof(Connection& conn);

private:
    // Logs `why` once per peer process and interval; returns -BMI_EACCES for the caller to
    // close the connection with. `answering` a hello, first tells the initiator where the kit
    // says so.
    int refuse(const Connection& conn, kit::Refusal why, bool answering = false);

    const std::uint32_t slot_count_;
    const std::uint32_t slot_size_;
    const bmi_size_t unexpected_limit_;  // ours, stated in every hello and reply
    std::uint64_t nonce_;  // with our pid, names this instance to a peer across reconnects
    std::string listen_name_;
    int event_fd_ = -1;
    int bell_fd_ = -1;
    // Keyless: any process of our uid gets in.
    kit::KeyGate keys_{"shm"};
    std::shared_ptr<kit::SameNodeTickets> tickets_;  // a same-node listener's; null: none
};

}  // namespace bmi::method::shm
