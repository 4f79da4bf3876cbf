// SPDX-License-Identifier: LGPL-2.1-or-later
// Grants. A receiver that posts a receive larger than the eager limit reserves room for one
// message of that size and says so (GRANT); the sender's next large message then leaves as
// one EAGER frame under the grant instead of RTS, CTS and DATA. That round trip cost two of
// the three context switches per message of a 1 MiB ping-pong on one core (raw TCP: one).
//
// A grant names no receive, only room: matching stays by tag in header order, and a granted
// message whose receive another message took is buffered within the reservation, charged to
// the grant budget (BMI_TCP_GRANT_*), never to the early-data budget, whose pauses it would
// otherwise bring into play. Each side holds the other to the bounds: we keep at most
// max_grants_per_connection outstanding per connection, each within the budget; a peer that
// sends more GRANTs than that, uses one it was not given, or sends past one is out of step
// and loses its connection.
//
// A GRANT never makes a write of its own: it leaves with the connection's next write (the
// request or reply the application posts next, a CTS). Sent alone, right after a large
// message, the 32-byte segment slowed the next round trip of a 1 MiB ping-pong by a quarter
// under BBR (this machine's congestion control); a receive posted before the peer's send
// gets its grant out with our next message all the same.
#include <algorithm>

#include "methods/tcp/tcp_method_impl.hpp"

namespace bmi::method::tcp {

void TcpMethod::maybe_grant(TcpPeer& peer, bmi_size_t size) {
    Connection* c = peer.send_connection;
    if (c == nullptr || c->closed || !c->peer_takes_grants || c->state != ConnState::established ||
        c->framing != Framing::v2)
        return;
    if (size <= c->eager_limit || size > grant_size_limit ||
        c->grants_given.size() >= max_grants_per_connection ||
        !held_.grants.fits(peer.granted, grant_reservation(size)))
        return;
    held_.grants.charge(peer.granted, grant_reservation(size));
    c->grants_given.push_back(Grant{next_cookie_++, size, false});
}

void TcpMethod::queue_grants(Connection& c) {
    for (Grant& g : c.grants_given) {
        if (g.sent) continue;
        g.sent = true;
        queue_control(c, Mode::grant, 0, g.cookie, g.size);
    }
}

void TcpMethod::on_grant(Connection& c) {
    const Header& h = c.reader.header;
    const bool known = std::any_of(c.grants_held.begin(), c.grants_held.end(),
                                   [&](const Grant& g) { return g.cookie == h.cookie; });
    if (known || c.grants_held.size() >= max_grants_per_connection) {
        protocol_error(c, "GRANT beyond the outstanding bound, or a cookie it already used");
        return;
    }
    c.grants_held.push_back(Grant{h.cookie, static_cast<bmi_size_t>(h.size), true});
}

std::optional<Grant> TcpMethod::take_grant(Connection& c, bmi_size_t size) {
    auto it = std::find_if(c.grants_held.begin(), c.grants_held.end(),
                           [&](const Grant& g) { return g.size >= size; });
    if (it == c.grants_held.end()) return std::nullopt;
    const Grant grant = *it;
    c.grants_held.erase(it);
    return grant;
}

bool TcpMethod::claim_grant(Connection& c) {
    const Header& h = c.reader.header;
    auto it = std::find_if(c.grants_given.begin(), c.grants_given.end(),
                           [&](const Grant& g) { return g.sent && g.cookie == h.cookie; });
    if (it == c.grants_given.end() || h.size > static_cast<std::uint64_t>(it->size)) {
        protocol_error(c, "EAGER under no GRANT of ours, or larger than it");
        return false;
    }
    c.reader.frame_grant = it->size;
    c.grants_given.erase(it);
    return true;
}

void TcpMethod::settle_grant(Connection& c) {
    if (c.reader.frame_grant == 0) return;
    held_.grants.release(c.peer->granted, grant_reservation(c.reader.frame_grant));
    c.reader.frame_grant = 0;
}

void TcpMethod::release_grants(Connection& c) {
    if (!c.peer) return;
    for (const Grant& g : c.grants_given)
        held_.grants.release(c.peer->granted, grant_reservation(g.size));
    c.grants_given.clear();
    settle_grant(c);
}

}  // namespace bmi::method::tcp
