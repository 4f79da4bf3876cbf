// SPDX-License-Identifier: LGPL-2.1-or-later
// The early-data budget: what peers may make us buffer before a receive claims it. Eager
// payloads cost their size, and every arrival (an RTS or legacy rendezvous header too) costs
// arrival_overhead, against a bound per peer and one in total. A connection whose next frame
// does not fit is no longer read, so the sender waits in its own socket buffers, not in our
// memory; it is read again as soon as a receive claims enough (or one is posted for it).

#include "methods/tcp/tcp_method_impl.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

namespace {
bool makes_arrival(Mode mode) {
    return mode == Mode::eager || mode == Mode::rts || mode == Mode::rendezvous;
}

bmi_size_t cost_of(Mode mode, bmi_size_t size) {
    // Only eager payloads are buffered; the others stay with the sender or in the socket.
    return arrival_overhead + (mode == Mode::eager ? size : 0);
}

bmi_size_t cost_of(const Arrival& arrival) {
    return cost_of(arrival.kind == Arrival::Kind::eager ? Mode::eager : Mode::rts, arrival.size);
}
}  // namespace

void load_limits(const support::Settings& settings, Limits& out) {
    out.early.peer_bytes = settings.number(SettingId::early_peer_bytes);
    out.early.total_bytes = settings.number(SettingId::early_total_bytes);
    out.stall_timeout = settings.duration(SettingId::stall_timeout);
    out.rendezvous_timeout = settings.duration(SettingId::rendezvous_timeout);
    out.setup_timeout = settings.duration(SettingId::setup_timeout);
    out.send_timeout = settings.duration(SettingId::send_timeout);
    out.pending_per_source =
        static_cast<std::size_t>(settings.number(SettingId::pending_per_source));
    out.grants.peer_bytes = settings.number(SettingId::grant_peer_bytes);
    out.grants.total_bytes = settings.number(SettingId::grant_total_bytes);
}

bool TcpMethod::admit_early(Connection& c) {
    const Header& h = c.reader.header;
    // A frame under one of our GRANTs has its room reserved (tcp_grants.cpp).
    if (!makes_arrival(h.mode) || c.reader.frame_grant != 0) return true;
    TcpPeer& peer = *c.peer;
    // A frame a posted receive takes at once is never buffered.
    if (peer.posted_recvs.contains(tag_of(h))) return true;
    const bmi_size_t cost = cost_of(h.mode, static_cast<bmi_size_t>(h.size));
    if (held_.early.fits(peer.early, cost)) {
        held_.early.charge(peer.early, cost);
        c.reader.early_reserved = cost;
        return true;
    }
    if (c.reader.phase != ReadPhase::wait_early) {
        BMI_LOG(tcp,
                "tcp: %s holds %lld bytes of early data (peer bound %lld, all peers %lld "
                "of %lld); not reading it until receives claim some",
                describe_peer(peer).c_str(), static_cast<long long>(peer.early.bytes),
                static_cast<long long>(held_.early.limits().peer_bytes),
                static_cast<long long>(held_.early.total()),
                static_cast<long long>(held_.early.limits().total_bytes));
        c.reader.phase = ReadPhase::wait_early;
        held_.paused.push_back(c.id);
    }
    return false;
}

void TcpMethod::keep_arrival(Connection& c, Arrival arrival) {
    TcpPeer& peer = *c.peer;
    if (arrival.granted) {
        held_.grants.charge(peer.granted, grant_reservation(arrival.size));
    } else if (c.reader.early_reserved == cost_of(arrival)) {
        c.reader.early_reserved = 0;  // the header's reservation is now the arrival's charge
    } else {
        release_reservation(c);
        held_.early.charge(peer.early, cost_of(arrival));
    }
    peer.arrivals.push(std::move(arrival));
}

void TcpMethod::release_reservation(Connection& c) {
    if (c.reader.early_reserved == 0) return;
    held_.early.release(c.peer->early, c.reader.early_reserved);
    c.reader.early_reserved = 0;
    held_.released = true;
}

void TcpMethod::uncharge(TcpPeer& peer, const Arrival& arrival) {
    if (arrival.granted) {
        held_.grants.release(peer.granted, grant_reservation(arrival.size));
        return;  // the early-data budget, which paused connections wait for, is unchanged
    }
    held_.early.release(peer.early, cost_of(arrival));
    held_.released = true;
}

void TcpMethod::drop_arrivals(TcpPeer& peer) {
    peer.arrivals.for_each([&](const Arrival& a) {
        uncharge(peer, a);
        returner_.freed(a.size);
    });
    peer.arrivals.clear();
}

void TcpMethod::resume_paused() {
    held_.released = false;
    if (held_.paused.empty()) return;
    const std::vector<std::uint64_t> waiting = std::move(held_.paused);
    held_.paused.clear();
    for (std::uint64_t id : waiting) {
        Connection* c = find_connection(id);
        if (c == nullptr || c->closed || c->reader.phase != ReadPhase::wait_early) continue;
        c->reader.phase = ReadPhase::header;
        restart_stall_clock(*c);
        if (!admit_early(*c)) continue;  // still over: admit_early queued it again
        dispatch_frame(*c);
        if (!c->closed) on_readable(*c);
    }
}

}  // namespace bmi::method::tcp
