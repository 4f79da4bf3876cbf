// SPDX-License-Identifier: LGPL-2.1-or-later
// A peer we looked up that restarted at its address without a bye: its new process drops what
// we send as from an endpoint that never said hello, and only our probe, which names us, lets
// it say that it holds nothing of ours (doc/methods/ofi.md, "Restarted peers").
#include "methods/ofi/ofi_method_impl.hpp"
#include "support/keys/key_proof.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::ofi {

namespace {
// Resets to strangers in the provider at once: a flood of probes under made-up names makes us
// hold no more sends, nor entries beyond the lingering ones (retire_if_unused), than this.
constexpr std::uint32_t most_resets_out = 16;
}  // namespace

Request& OfiMethod::unsealed_request(fi_addr_t addr, Kind kind, std::vector<std::byte> body) {
    Request& request = new_request(Request::Role::control, nullptr);
    request.bytes = std::move(body);
    request.data = request.bytes.data();
    request.length = request.bytes.size();
    request.addr = addr;
    request.tag = control_tag(kind, 0);
    return request;
}

void OfiMethod::send_probe(OfiPeer& peer) {
    Probe probe;
    probe.nonce = support::keys::fresh_nonce();
    probe.name = fabric_.name();
    peer.probe = OfiPeer::ProbeSent{probe.nonce, peer.heard};
    submit(unsealed_request(peer.fi_addr, Kind::probe, encode(probe)));
}

void OfiMethod::on_probe_due(OfiPeer& peer, kit::DeadlineKey key,
                             kit::Deadlines::Clock::time_point now) {
    if (peer.probe_clock.expired_if_owed(peer.probe_owed(provider_.shm), timers_, key, peer.heard,
                                         now, probe_after()) &&
        !left_its_region(peer))
        send_probe(peer);
}

bool OfiMethod::left_its_region(OfiPeer& peer) {
    if (!provider_.shm || !peer.region) return false;
    const auto file = shm_region_file(peer.endpoint);
    if (!file) return false;
    if (*file == *peer.region) {
        // The same file, whose maker may have ended without a successor (killed, crashed): a
        // probe would only go into its region, and the wait end at the silence bound.
        if (!peer.region_lock || peer.region_lock->owner_alive(peer.endpoint)) return false;
        BMI_LOG(error, "bmi_ofi: %s ended (its region's process is gone): what waits on it fails",
                peer.address.c_str());
        ++counted_.regions_ended;
        lose(peer, -BMI_ECONNRESET);
        return true;
    }
    // A live endpoint holds its name (ShmNameClaim): a new file is a new process, and the
    // probe would go into the old one's region, which we still map.
    BMI_LOG(error, "bmi_ofi: %s restarted (a new region in /dev/shm): what waits on it fails",
            peer.address.c_str());
    ++counted_.regions_replaced;
    lose(peer, -BMI_ECONNRESET);
    return true;
}

void OfiMethod::on_probe(std::span<const std::byte> body, fi_addr_t source) {
    // A peer of ours: its sealed ping, answered, says what a reset would not.
    if (peer_at(source)) return;
    auto probe = decode_probe(body);
    if (!probe) return;
    // A name we hold is a peer's (or one we answered already): whoever sent this, we reset
    // nobody we know.
    const std::string prober = address_of_name(probe->name);
    if (addresses_.holds(prober) || in_flight_.resets_out >= most_resets_out) return;
    const fi_addr_t addr = enter_address(probe->name, prober);
    if (addr == FI_ADDR_NOTAVAIL) return;
    const Reset reset{probe->nonce, gate_.prove_reset(probe->nonce, prober, own_endpoint_)};
    Request& request = unsealed_request(addr, Kind::reset, encode(reset));
    request.to_stranger = true;
    ++in_flight_.resets_out;
    ++counted_.resets_sent;
    BMI_LOG(ofi, "bmi_ofi: a probe from %s, which we do not know: reset", prober.c_str());
    submit(request);
    // Its entry lingers once the reset has left, as a forgotten peer's (the prober's hello
    // comes over the connection beneath it, and claims it).
    forgotten_.retiring.push_back(addr);
    retire_if_unused(addr);
}

void OfiMethod::on_reset(std::span<const std::byte> body, fi_addr_t source) {
    auto peer = peer_at(source);
    if (!peer || peer->state != OfiPeer::State::ready || !peer->probe) return;
    auto reset = decode_reset(body);
    // Only the answer to our last probe, before anything else came from the peer since.
    if (!reset || reset->nonce != peer->probe->nonce || peer->heard != peer->probe->heard) return;
    if (!gate_.verify_reset(reset->nonce, own_endpoint_, peer->endpoint, reset->proof)) {
        BMI_LOG(error, "bmi_ofi: %s: a reset without the proof of our key; ignored",
                peer->address.c_str());
        return;
    }
    BMI_LOG(error, "bmi_ofi: %s restarted and holds nothing of ours: what waits on it fails",
            peer->address.c_str());
    peer->probe.reset();
    ++counted_.resets_taken;
    lose(*peer, -BMI_ECONNRESET);
}

}  // namespace bmi::method::ofi
