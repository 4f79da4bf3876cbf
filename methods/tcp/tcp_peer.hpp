// SPDX-License-Identifier: LGPL-2.1-or-later
// A tcp peer: its identity, its connections, and the receive-matching state shared by them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "methods/early_budget.hpp"
#include "methods/method.hpp"
#include "methods/tcp/tcp_address.hpp"
#include "methods/tcp/tcp_arrivals.hpp"
#include "support/op_queue/op_queue.hpp"

namespace bmi::method::tcp {

struct Connection;

using OpList = support::OpQueue<Operation, SafeHook, &Operation::method_hook>;

class TcpPeer final : public Peer {
public:
    // "tcp://host:port" this process looked up; "" for a peer that reached us first, which is
    // known only by its connection (as in OrangeFS) and cannot be called back.
    std::string canonical;
    // The listen address such a peer announced in HELLO: an unproven claim, kept for the log
    // only. It names no peer and routes nothing (SPEC §6), or any client could take over the
    // traffic of the address it names.
    std::string announced;
    SocketAddress target;   // where to connect; empty for a peer that reached us first
    SocketAddress remote;   // remote end of the latest connection (peer_host, ranges)
    std::size_t plane = 0;  // the allocated plane target lies on (TcpListeners), if any
    // The peer did not answer HELLO (an OrangeFS process), or spoke legacy to us first.
    bool legacy = false;
    // It answered our keyless offer that it admits only key holders: later connections to it
    // open with HELLO, so their sends fail with -BMI_EACCES instead of being written unread.
    bool wants_key = false;

    Connection* send_connection = nullptr;  // one connection carries all our sends
    std::vector<Connection*> connections;
    Arrivals arrivals;           // arrivals with no matching receive yet, by tag
    EarlyBudget::Account early;  // what arrivals cost against TcpMethod::held_.early
    // Our GRANTs outstanding toward it, and the granted arrivals it left unclaimed, against
    // TcpMethod::held_.grants (tcp_grants.cpp).
    EarlyBudget::Account granted;
};

}  // namespace bmi::method::tcp
