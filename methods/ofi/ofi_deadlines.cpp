// SPDX-License-Identifier: LGPL-2.1-or-later
// What the ofi method waits for and how long (kit::Deadlines on a timerfd in its epoll set),
// and what an unproven peer may hold: the peer rules of SPEC §6 on libfabric endpoints.
#include <rdma/fi_domain.h>

#include <algorithm>

#include "methods/kit/posted_recvs.hpp"
#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/ofi/ofi_settings.hpp"
#include "methods/ofi/ofi_shm.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

namespace {
using Clock = kit::Deadlines::Clock;

long long ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

constexpr std::uint32_t most_doublings = 8;
}  // namespace

void OfiMethod::load_limits(const Config& config) {
    const auto& s = config.settings;
    limits_.early.peer_bytes = s.number(SettingId::early_peer_bytes);
    limits_.early.total_bytes = s.number(SettingId::early_total_bytes);
    limits_.setup = s.duration(SettingId::setup_timeout);
    limits_.stall = s.duration(SettingId::stall_timeout);
    limits_.send = s.duration(SettingId::send_timeout);
    limits_.rendezvous = s.duration(SettingId::rendezvous_timeout);
    limits_.silence = s.duration(SettingId::silent_peer_timeout);
    limits_.pending_per_source = static_cast<std::size_t>(s.number(SettingId::pending_per_source));
    limits_.pending_total = static_cast<std::size_t>(s.number(SettingId::pending_total));
    limits_.shm_sweep = s.duration(SettingId::shm_sweep_period);
    held_.early.set_limits(limits_.early);
    unproven_.admission.set_limit(limits_.pending_per_source);
}

bool OfiMethod::run_deadlines(Clock::time_point now) {
    // progress() is not told which descriptor woke the caller: the clock says whether the
    // timer can have gone off, so a pass before it costs no system call.
    if (timers_.armed_at() > now) return false;
    return timers_.expire([this](kit::DeadlineKey key, Clock::time_point when) {
        on_deadline(key, when);
    }) > 0;
}

void OfiMethod::on_deadline(kit::DeadlineKey key, Clock::time_point now) {
    if (key == sweep_key) {
        // A server runs for weeks; the regions of clients killed meanwhile (16 MiB each with
        // libfabric's defaults) would otherwise stay until the next ofi+shm process starts.
        remove_regions_of_dead_clients();
        lose_ended_shm_clients();
        release_silenced();
        timers_.schedule(sweep_key, now + limits_.shm_sweep);
        return;
    }
    auto peer = peer_at(key.id);
    if (!peer) return;
    switch (key.kind) {
        case kit::DeadlineKind::setup:
            late_handshake(*peer);
            return;
        case kit::DeadlineKind::send:
            lose_if_late(*peer, peer->send_clock, peer->sends_out > 0 || peer->waits_for_credits(),
                         peer->send_progress(), key, now, limits_.send,
                         "completed none of our sends and gave no credits back");
            return;
        case kit::DeadlineKind::stall:
            lose_if_late(*peer, peer->stall_clock, peer->owes_data(), peer->stall_progress(), key,
                         now, limits_.stall,
                         "sent no data of a large message, or not the message others wait behind");
            return;
        case kit::DeadlineKind::rendezvous:
            fail_unanswered_rts(*peer, now);
            fail_unanswered_revokes(*peer, now);
            return;
        case kit::DeadlineKind::silence:
            on_silence(*peer, key, now);
            return;
        case kit::DeadlineKind::probe:
            on_probe_due(*peer, key, now);
            return;
        default:
            return;
    }
}

void OfiMethod::lose_if_late(OfiPeer& peer, kit::ProgressDeadline& clock, bool owed,
                             std::uint64_t count, kit::DeadlineKey key, Clock::time_point now,
                             std::chrono::milliseconds limit, const char* what) {
    if (!clock.expired_if_owed(owed, timers_, key, count, now, limit)) return;
    BMI_LOG(error, "bmi_ofi: %s %s in %lld ms; taken as gone", peer.address.c_str(), what,
            ms(limit));
    lose(peer);
}

void OfiMethod::watch_silence(OfiPeer& peer) {
    if (!peer.silence_watched()) return;
    if (!peer.reached_us && peer.waited_on())
        peer.probe_clock.start(timers_, {peer.fi_addr, kit::DeadlineKind::probe}, peer.heard,
                               probe_after());
    const kit::DeadlineKey key{peer.fi_addr, kit::DeadlineKind::silence};
    if (peer.silence_clock.timed) {
        // An idle client's clock may be far out: a receive posted for it now is owed the bound.
        if (peer.waited_on())
            timers_.schedule_by(key, peer.silence_clock.since + limits_.silence / 2);
        return;
    }
    peer.silence_clock.start(timers_, key, peer.heard, silence_interval(peer));
}

std::chrono::milliseconds OfiMethod::silence_interval(const OfiPeer& peer) const {
    const auto half = limits_.silence / 2;
    // An idle client that answers no ping may be a live process that does not poll: it is
    // asked less and less often (at most 256 halves apart), and never lost for silence alone.
    if (peer.waited_on() || peer.asked != peer.heard) return half;
    return half * (1 << std::min(peer.unanswered, most_doublings));
}

void OfiMethod::on_silence(OfiPeer& peer, kit::DeadlineKey key, Clock::time_point now) {
    // Each interval is one clock: a peer heard from (a pong, or anything else) since the last
    // ping is pinged; a peer we wait on that answered none is lost.
    if (!peer.silence_clock.expired_if_owed(peer.silence_watched(), timers_, key, peer.heard, now,
                                            silence_interval(peer)))
        return;
    const bool answered = peer.asked != peer.heard;
    if (!answered && peer.waited_on()) {
        BMI_LOG(error, "bmi_ofi: %s sent nothing and answered no ping in %lld ms; taken as gone",
                peer.address.c_str(), ms(limits_.silence));
        lose(peer);
        return;
    }
    if (!peer.reached_us && left_its_region(peer)) return;
    peer.unanswered = answered ? 0 : peer.unanswered + 1;
    peer.asked = peer.heard;
    send_control(peer, Kind::ping, 0, nullptr, 0);
    // A server of ours may have restarted since: only a probe lets its new process say so.
    if (!peer.reached_us) send_probe(peer);
    peer.silence_clock.start(timers_, key, peer.heard, silence_interval(peer));
}

void OfiMethod::on_failed_ping(fi_addr_t addr, int error) {
    auto peer = peer_at(addr);
    if (!peer || peer->state != OfiPeer::State::ready) return;
    BMI_LOG(ofi, "bmi_ofi: a ping to %s failed (%d): its process or node is gone",
            peer->address.c_str(), error);
    lose(*peer, error);
}

void OfiMethod::lose_ended_shm_clients() {
    std::vector<std::shared_ptr<OfiPeer>> ended;
    for (const auto& [addr, peer] : peers_)
        if (peer->reached_us && peer->state == OfiPeer::State::ready &&
            !shm_endpoint_may_send(peer->endpoint))
            ended.push_back(peer);
    for (const auto& peer : ended) {
        BMI_LOG(ofi, "bmi_ofi: %s ended without a bye; forgotten", peer->address.c_str());
        lose(*peer, -BMI_ECONNRESET);
    }
}

void OfiMethod::lose(OfiPeer& peer, int error) {
    // A peer we looked up may be back: its address stays, and the next send greets it again,
    // as after its bye (a tcp connection lost to a deadline is connected again the same way).
    peer.lost = peer.reached_us;
    fail_peer(peer, error);
    if (!peer_gone(peer)) return;
    if (peer.addr() != 0)
        sink_.peer_gone(peer);
    else
        erase_peer(peer.fi_addr);  // never handed out: nothing else refers to it
}

void OfiMethod::late_handshake(OfiPeer& peer) {
    if (peer.state == OfiPeer::State::greeting) {
        BMI_LOG(error, "bmi_ofi: %s did not answer our hello in %lld ms", peer.address.c_str(),
                ms(limits_.setup));
        handshakes_.erase(peer.fi_addr);
        // The next send greets again, as after a refusal. What waited on it fails, receives
        // too: a peer that answers no hello sends nothing either (as a tcp connect that fails).
        peer.state = OfiPeer::State::fresh;
        flush_waiting(peer, -BMI_ETIMEDOUT);
        kit::fail_posted_recvs(peer, -BMI_ETIMEDOUT,
                               [this](Operation& op, int e) { end_posted_recv(op, e); });
    } else if (peer.state == OfiPeer::State::answered) {
        BMI_LOG(error, "bmi_ofi: %s did not prove the key in %lld ms; dropped",
                peer.endpoint.c_str(), ms(limits_.setup));
        drop_unproven(peer_at(peer.fi_addr));
    }
}

void OfiMethod::fail_unanswered_rts(OfiPeer& peer, Clock::time_point now) {
    const auto due = kit::take_due(timers_, {peer.fi_addr, kit::DeadlineKind::rendezvous}, now,
                                   large_.awaiting_cts, [&peer](const Operation* op) {
                                       return op->peer == &peer
                                                  ? method_slots<OpSlots>(*op).answer_due
                                                  : Clock::time_point{};
                                   });
    for (std::uint32_t transfer : due) {
        Operation& op = *large_.awaiting_cts.at(transfer);
        large_.awaiting_cts.erase(transfer);
        BMI_LOG(error, "bmi_ofi: %s did not answer an RTS in %lld ms; failing the send",
                peer.address.c_str(), ms(limits_.rendezvous));
        // As a cancel: the receiver drops the announcement if it still comes to it.
        const Abort abort{transfer, 0};
        send_control(peer, Kind::abort, op.tag, &abort, sizeof abort);
        finish(op, -BMI_ETIMEDOUT);
    }
}

bool OfiMethod::admit_hello(OfiPeer& peer) {
    // A host at its bound loses its oldest unproven hello, as tcp closes a source's oldest
    // connection: a key holder's handshake, done in a round trip, is not locked out by
    // endpoints that never finish theirs.
    if (!unproven_.admission.has_room(peer.host))
        if (auto oldest = unproven_.admission.oldest(peer.host)) {
            BMI_LOG(error, "bmi_ofi: %s holds %zu unproven hellos; its oldest is dropped",
                    peer.host.c_str(), unproven_.admission.held(peer.host));
            if (auto old = peer_at(oldest->ticket))
                drop_unproven(old);
            else
                release_ticket(oldest->ticket);
        }
    if (unproven_.tickets >= limits_.pending_total) {
        BMI_LOG(error, "bmi_ofi: %s: %zu unproven hellos in all; dropped", peer.endpoint.c_str(),
                unproven_.tickets);
        return false;
    }
    unproven_.admission.admit(peer.host, peer.fi_addr, Clock::now());
    ++unproven_.tickets;
    timers_.schedule({peer.fi_addr, kit::DeadlineKind::setup}, Clock::now() + limits_.setup);
    return true;
}

void OfiMethod::release_ticket(fi_addr_t addr) {
    if (unproven_.admission.release(addr)) --unproven_.tickets;
    timers_.cancel({addr, kit::DeadlineKind::setup});
}

void OfiMethod::drop_unproven(const std::shared_ptr<OfiPeer>& peer) {
    const fi_addr_t addr = peer->fi_addr;
    handshakes_.erase(addr);
    release_ticket(addr);
    peer->state = OfiPeer::State::fresh;
    if (peer->addr() != 0 || !peer->posted_recvs.empty() || !peer->waiting.empty()) return;
    // With the entry its hello made: an endpoint that never proves the key keeps none.
    erase_peer(addr);
}

void OfiMethod::track(Request& r) {
    // A receive under our grant waits for the user's peer, as a posted receive does: untimed.
    if (r.counted || r.role == Request::Role::buffer || r.role == Request::Role::grant_recv) return;
    auto peer = peer_at(r.addr);
    if (!peer) return;
    // The handshake's messages are the setup deadline's: the first one to a peer also waits
    // for the provider to connect, which the send deadline (a bound on a peer that stopped
    // reading) is not about.
    if (r.role == Request::Role::control && peer->handshaking()) return;
    r.counted = true;
    if (r.role == Request::Role::data_recv) {
        ++peer->data_recvs_out;
        peer->stall_clock.start(timers_, {r.addr, kit::DeadlineKind::stall}, peer->stall_progress(),
                                limits_.stall);
    } else {
        ++peer->sends_out;
        peer->send_clock.start(timers_, {r.addr, kit::DeadlineKind::send}, peer->send_progress(),
                               limits_.send);
        // shm: a send into the region of a server that ended never completes; the probe's
        // look at the region finds that within probe_after, not at the send deadline.
        if (provider_.shm && !peer->reached_us)
            peer->probe_clock.start(timers_, {r.addr, kit::DeadlineKind::probe}, peer->heard,
                                    probe_after());
    }
}

void OfiMethod::untrack(Request& r) {
    if (!r.counted) return;
    r.counted = false;
    auto peer = peer_at(r.addr);
    if (!peer) return;
    if (r.role == Request::Role::data_recv) {
        if (peer->data_recvs_out > 0) --peer->data_recvs_out;
        ++peer->chunks_done;
    } else {
        if (peer->sends_out > 0) --peer->sends_out;
        ++peer->sends_done;
    }
}

void OfiMethod::fail_peer(OfiPeer& peer, int error) {
    peer.state = OfiPeer::State::departed;
    const fi_addr_t addr = peer.fi_addr;
    kit::fail_posted_recvs(peer, error, [this](Operation& op, int e) { end_posted_recv(op, e); });
    flush_waiting(peer, error);
    peer.arrivals.remove_if([](const Arrival&) { return true; },
                            [&](const Arrival& a) { release_early(peer, a); });
    drop_parked(addr);
    drop_waiting(peer);
    std::erase_if(large_.awaiting_cts, [&](const auto& entry) {
        if (entry.second->peer != &peer) return false;
        finish(*entry.second, error);
        return true;
    });
    // Its posts the provider never took end now.
    if (auto it = backlog_.by_peer.find(addr); it != backlog_.by_peer.end()) {
        const std::deque<Request*> unposted = std::move(it->second);
        backlog_.by_peer.erase(it);
        for (Request* request : unposted) end_request(*request, error);
    }
    // In the provider: data receives are cancelled (they write the user's buffer), sends are
    // let go of (they only read it, and end when the endpoint closes).
    std::vector<Operation*> let_go;
    for (auto& [request, owned] : requests_) {
        Operation* op = request->op;
        if (op == nullptr || op->peer != &peer) continue;
        if (Request::receives_data(request->role)) {
            method_slots<OpSlots>(*op).error = error;
            fi_cancel(&fabric_.ep()->fid, &request->context);
            continue;
        }
        request->op = nullptr;
        if (std::find(let_go.begin(), let_go.end(), op) == let_go.end()) let_go.push_back(op);
    }
    for (Operation* op : let_go) finish(*op, error);
    handshakes_.erase(addr);
    release_ticket(addr);
    timers_.cancel_all(addr);
    peer.send_clock.timed = false;
    peer.stall_clock.timed = false;
}

}  // namespace bmi::method::ofi
