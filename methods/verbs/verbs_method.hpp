// SPDX-License-Identifier: LGPL-2.1-or-later
// The verbs method's entry in the static method table: RDMA over libibverbs RC queue pairs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "methods/method.hpp"

namespace bmi::method::verbs {

// Creates a verbs instance; with a listen address "verbs://host:port" it listens there for
// bootstrap connections. -BMI_ENODEV without a usable RDMA port, -BMI_EINVAL if malformed.
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

// Parses and resolves a "verbs://host:port" address; called without any lock (it may block
// in getaddrinfo), before the method's lookup_prepared.
int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out);

// OrangeFS's InfiniBand configurations name the method bmi_ib and its addresses ib://host:port;
// they run here unchanged (OrangeFS's own IB wire is not spoken: doc/methods/verbs.md).
inline constexpr Descriptor descriptor{"bmi_verbs",     "verbs",  &create,
                                       &prepare_lookup, "bmi_ib", "ib"};

// get_info option (method-wide, peer ignored) that copies the counters below into a Stats:
// what doc/PERFORMANCE.md reports and what tests check. BMI_VERBS_STATS=1 also prints them
// to stderr when the instance is destroyed.
inline constexpr int get_stats_option = 0x7601;
struct Stats {
    std::uint64_t reg_hits = 0;    // transfers whose memory was already registered
    std::uint64_t reg_misses = 0;  // registrations made for one transfer
    std::uint64_t messages = 0;    // SENDs posted, of any type
    std::uint64_t eager_sends = 0;
    std::uint64_t rts_sends = 0;
    std::uint64_t credit_messages = 0;
    std::uint64_t read_wrs = 0;
    std::uint64_t fins = 0;          // FINs received (rendezvous sends finished)
    std::uint64_t parked = 0;        // messages held back (unexpected quota, early budget)
    std::uint64_t credit_waits = 0;  // times sends queued for lack of credits
    std::uint64_t srq_buffers = 0;   // receive buffers posted to the SRQ
    std::uint64_t connections = 0;   // live connections
    std::uint64_t peers = 0;         // peers the method tracks (looked up or connected and ready)
    std::uint64_t early_bytes = 0;   // what arrivals no receive has claimed hold (early budget)
    // Sleeps of the control layer on our own epoll set whose events it handed to us
    // (the single-method direct wait, Method::accept_wake_fd).
    std::uint64_t handed_wakeups = 0;
    std::uint64_t encrypted_connections = 0;  // connections whose handshake chose a cipher
    std::uint64_t sealed_bytes = 0;           // rendezvous data we sealed for a peer to READ
    std::uint64_t staging_waits = 0;          // times a send waited for the staging budget
};

// Test hooks; both need the peer's address. get_info: the ibv_qp* of the connection carrying
// the peer's traffic (into a void*), -BMI_ENOENT without one. set_info: hands an
// ibv_async_event to the method's handler as if the device had reported it (soft-RoCE raises
// no queue pair event a test could provoke); the handler acts only on QPs of ours.
inline constexpr int peer_qp_option = 0x7602;
inline constexpr int async_event_option = 0x7603;

// True if this host has an RDMA device; otherwise reason says why (tests skip on false).
bool device_available(std::string* reason);

}  // namespace bmi::method::verbs
