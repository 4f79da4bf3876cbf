// SPDX-License-Identifier: LGPL-2.1-or-later
// What the shared peer rules (peer_rules_test.cpp) need to know of each method: the setting
// that bounds a handshake, and a raw connection that speaks the method's hello the way an
// attacker would. A new method adds one adapter here and inherits every rule's test.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "bmi/core/instance.hpp"

namespace bmi::test {

// One connection to a listening instance, made and spoken by hand.
class RawAttacker {
public:
    virtual ~RawAttacker() = default;
    // True if the connection was made (and, for methods that need one, the device opened).
    virtual bool connected() const = 0;
    // Sends a keyed initiator's first flight (a hello with a fresh nonce offering a proof,
    // announcing `announced` as its listen address) and waits up to deadline_ms for the
    // acceptor's answer; true once answered. The proof the answer asks for is never sent.
    virtual bool send_keyed_hello(int deadline_ms, const std::string& announced = "") = 0;
    // True once the listener closed the connection (end of file or reset) within
    // deadline_ms; whatever the listener sent meanwhile is read and dropped.
    virtual bool closed_within(int deadline_ms) = 0;
    // Sends `count` messages of `bytes` each, framed as a large message's data that no receive
    // asked for, without a handshake; true once all are handed to the transport. False where
    // the method has no such frame to forge (MethodAdapter::unasked_dropped is nullopt there).
    virtual bool send_unasked_data(int /*count*/, std::size_t /*bytes*/) { return false; }
    // Completes a keyless handshake on its first call, then sends `count` eager messages of
    // `bytes` each without waiting for a credit back; true once all are handed to the
    // transport. False where the method has no credits (MethodAdapter::credits_gap says why).
    virtual bool send_ignoring_credits(int /*count*/, std::size_t /*bytes*/) { return false; }
    // Completes a keyless handshake on its first call, then grants the listener `count`
    // receives of 1 MiB, each for a tag of its own; true once all are handed to the transport.
    // False where the method takes no grants this way (MethodAdapter::grants_held is nullopt).
    virtual bool send_grants(int /*count*/) { return false; }
};

// Listens on 127.0.0.1 and pipes the bytes of the first connection it takes, both ways, to a
// connection of its own to `target` (a listen address): an attacker without the key who
// carries a handshake between two sockets. Everything stops and closes with the object.
class Relay {
public:
    Relay(const std::string& scheme, const std::string& target);
    ~Relay();
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;
    // The address a victim looks up to dial the relay.
    const std::string& address() const { return address_; }

private:
    void run();

    std::string target_;
    std::string address_;
    int listener_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// A listener of `scheme` that never answers: connections wait in its backlog, accepted by the
// kernel (a TCP handshake, a Unix socket's queue) and never by a process, so no hello of an
// initiator is ever read or answered. A tcp or verbs one takes `port` when given (one a
// server of the test has just left), else one the kernel picks.
class SilentListener {
public:
    explicit SilentListener(const std::string& scheme, std::uint16_t port = 0);
    ~SilentListener();
    SilentListener(const SilentListener&) = delete;
    SilentListener& operator=(const SilentListener&) = delete;
    // The address an initiator looks up to dial it.
    const std::string& address() const { return address_; }

private:
    int listener_ = -1;
    std::string address_;
};

// An address of `scheme` where nothing listens: a port of 127.0.0.1 held bound but never
// listening, so every connection attempt is reset, or an shm name nobody holds.
class ClosedAddress {
public:
    explicit ClosedAddress(const std::string& scheme);
    ~ClosedAddress();
    ClosedAddress(const ClosedAddress&) = delete;
    ClosedAddress& operator=(const ClosedAddress&) = delete;
    const std::string& address() const { return address_; }

private:
    int socket_ = -1;
    std::string address_;
};

struct MethodAdapter {
    std::string scheme;
    // The option string that sets the listener's handshake deadline to `ms` milliseconds.
    std::string setup_deadline_option(int ms) const;
    // The option string that bounds the early data the listener keeps for one peer.
    std::string early_peer_option(std::size_t bytes) const;
    // "<scheme>_<name>=<value>", for a setting every method has under the same name.
    std::string scheme_option(std::string_view name, std::size_t value) const;
    // The early data `server` holds now, where the method reports it through the instance
    // (verbs' statistics); nullopt where only its own tests can see it.
    std::optional<std::uint64_t> early_bytes_held(core::Instance& server, BMI_addr_t any) const;
    // Keyed handshakes `server` holds unproven now, where the method reports them through the
    // instance (ofi, whose provider keeps the connection beneath: no close to see); nullopt
    // where the attacker's connection shows it (closed_within).
    std::optional<std::uint64_t> unproven_held(core::Instance& server) const;
    // Receive buffers `server` posted in place of those its peers' messages wait in, where the
    // method posts such spares (ofi); nullopt elsewhere.
    std::optional<std::uint64_t> spare_buffers(core::Instance& server) const;
    // Large messages `client` sent under its receiver's grant, skipping RTS and CTS, where the
    // method reports them through the instance (ofi); nullopt elsewhere (tcp_grants_test).
    std::optional<std::uint64_t> sent_under_grant(core::Instance& client) const;
    // The grants of its peers `server` keeps now, where the method reports them through the
    // instance (ofi); nullopt elsewhere.
    std::optional<std::uint64_t> grants_held(core::Instance& server) const;
    // Data messages no receive asked for that `server` has dropped, where something beneath
    // the method would otherwise keep them (ofi over rxm: its unexpected queue); nullopt
    // where nothing does, with the reason in `why`.
    std::optional<std::uint64_t> unasked_dropped(core::Instance& server, std::string& why) const;
    // A keyless initiator's eager send may complete before the refusal: shm's once it is in
    // the peer's ring, tcp's first one once written with the upgrade offer (doc/security.md;
    // tcp_keys checks that the sends after it fail); elsewhere a refused handshake fails it.
    bool refused_send_may_complete = false;
    // Its addresses name hosts a resolver looks up (shm's name a local socket instead).
    bool resolves_host_names = true;
    // The option string that bounds the unfinished handshakes one source address may hold;
    // empty for a method without that bound.
    std::string per_source_option(int handshakes) const;
    // Its handshake is bytes on a stream socket, so a Relay can carry it (shm's passes
    // descriptors, which only a process of the same user can, and the kernel names it).
    bool handshake_is_bytes = true;
    // A handshake that reflects the instance's own nonce back to it is refused with its
    // reason (-BMI_EACCES at the sender). Empty: it is; else how not (a known gap).
    std::string reflection_reason_gap;
    // Out of descriptors, the listener closes an idle unfinished connection to take a new
    // client in. Empty: it does; else why not (a known gap of issue 37, printed as a skip).
    std::string sheds_idle_gap;
    // A transfer the receiver starts and stops fails at the stall deadline. Empty: it does;
    // else why not (a known gap of issue 37, printed as a skip).
    std::string stall_gap;
    // A connection that says nothing is closed at the setup deadline. Empty: it is; else why
    // it means nothing for the method (printed as a skip).
    std::string silent_gap;
    // Its peers are known by the provider address their messages come from, which for a
    // listening peer is its listen address: a lookup of that address finds the peer that came
    // in, keyed or not (nothing announced is taken).
    bool endpoint_is_name = false;
    // A peer that sends past the credits it was given is dropped with what it held. Empty: it
    // is (send_ignoring_credits forges it); else why the rule means nothing here.
    std::string credits_gap;
    // A receive cancelled while its message is on the way ends once, the message goes to the
    // tag's next receive and the connection stays. Empty: it does; else what the method does
    // instead, by design (printed as a skip).
    std::string cancel_in_flight;
    // A connection to listen_address that says nothing, made without waiting on a full
    // backlog: its descriptor, or -1.
    int idle_connection(const std::string& listen_address) const;
    // A raw connection to the instance listening at listen_address (its listen_addresses()).
    std::unique_ptr<RawAttacker> attack(const std::string& listen_address) const;
};

// The adapter of a compiled method; fails the current test for an unknown scheme.
const MethodAdapter& adapter_for(const std::string& scheme);

}  // namespace bmi::test
