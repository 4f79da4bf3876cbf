// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_settings.hpp"

#include "methods/ofi/ofi_wire.hpp"

namespace bmi::method::ofi {

namespace {
using T = support::SettingType;
using I = SettingId;
using D = support::PeerDeadline;
using namespace support::setting_units;

// Keys and environment names follow the rule of support's rows (setting_table.cpp).
constexpr support::SettingSpec rows[] = {
    {I::eager_bytes, "ofi_eager_bytes", "BMI_OFI_EAGER_BYTES", T::size, "64K", "bytes", 1 * KiB,
     64 * KiB, "",
     "expected messages up to this size leave at once in one tagged message; larger ones wait "
     "for the receiver's clear-to-send"},
    {I::chunk_bytes, "ofi_chunk_bytes", "BMI_OFI_CHUNK_BYTES", T::size, "4M", "bytes",
     smallest_piece, largest_piece, "",
     "a large message leaves in tagged sends of at most this size"},
    {I::recv_buffers, "ofi_recv_buffers", "BMI_OFI_RECV_BUFFERS", T::count, "64", "buffers", 4,
     4096, "",
     "receive buffers kept posted for small and control messages from every peer together"},
    {I::early_peer_bytes, "ofi_early_peer_bytes", "BMI_OFI_EARLY_PEER_BYTES", T::size, "8M",
     "bytes", 64 * KiB, TiB, "",
     "early data (unclaimed eager payloads and announcements) kept for one peer; beyond it "
     "its messages wait in their receive buffers"},
    {I::early_total_bytes, "ofi_early_total_bytes", "BMI_OFI_EARLY_TOTAL_BYTES", T::size, "256M",
     "bytes", 64 * KiB, TiB, "", "early data kept for all peers together"},
    support::peer_deadline_row(
        D::setup, I::setup_timeout, "ofi_setup_timeout_ms", "BMI_OFI_SETUP_TIMEOUT_MS",
        "a handshake not finished by then is dropped: an acceptor forgets the peer and removes "
        "its address-vector entry, an initiator's waiting sends fail with -BMI_ETIMEDOUT"),
    support::peer_deadline_row(
        D::stall, I::stall_timeout, "ofi_stall_timeout_ms", "BMI_OFI_STALL_TIMEOUT_MS",
        "a large message whose data stops arriving for this long fails with -BMI_ETIMEDOUT, and "
        "its sender is taken as gone; so is a sender whose later messages wait this long for an "
        "earlier one"),
    support::peer_deadline_row(
        D::send, I::send_timeout, "ofi_send_timeout_ms", "BMI_OFI_SEND_TIMEOUT_MS",
        "a peer whose sends the provider completes none of for this long is taken as gone, and "
        "its operations fail with -BMI_ETIMEDOUT"),
    support::peer_deadline_row(
        D::rendezvous, I::rendezvous_timeout, "ofi_rendezvous_timeout_ms",
        "BMI_OFI_RENDEZVOUS_TIMEOUT_MS",
        "a large send whose RTS the receiver neither clears nor refuses fails after this long"),
    {I::silent_peer_timeout, "ofi_silent_peer_timeout_ms", "BMI_OFI_SILENT_PEER_TIMEOUT_MS",
     T::duration, "30s", "ms", 1, 24 * hour_ms, "",
     "a peer we wait on (a receive posted for it) that sends nothing for half this long is asked "
     "to answer, which it does when its process next polls; with no answer by this long it is "
     "taken as gone, and its operations fail with -BMI_ETIMEDOUT. An idle client is asked too, "
     "less often while it does not answer, so that one whose process ended is forgotten. A "
     "server we wait on is also asked after a quarter of this (at most 1 s) whether it "
     "restarted (over shm: or ended); if it did, our operations with it fail at once with "
     "-BMI_ECONNRESET"},
    support::pending_per_source_row(I::pending_per_source, "ofi_pending_per_source",
                                    "BMI_OFI_PENDING_PER_SOURCE", "16"),
    {I::pending_total, "ofi_pending_total", "BMI_OFI_PENDING_TOTAL", T::count, "1024", "handshakes",
     1, 1 << 20, "",
     "keyed hellos not yet proven (each an address-vector entry) from all sources together; a "
     "new one beyond it is dropped with its entry"},
    {I::spin_us, "ofi_spin_us", "BMI_OFI_SPIN_US", T::count, "20", "us", 0, 10'000, "",
     "how long a test call polls the completion queue before it sleeps (or naps, on a provider "
     "without a wait descriptor); 0 = at once"},
    {I::transfer_spin_us, "ofi_transfer_spin_us", "BMI_OFI_TRANSFER_SPIN_US", T::count, "500", "us",
     0, 10'000, "",
     "the same while a message above ofi_eager_bytes moves: the provider moves its data only "
     "when this process polls, so a sleep stalls the peer too; 0 = use ofi_spin_us"},
    {I::nap_us, "ofi_nap_us", "BMI_OFI_NAP_US", T::count, "1000", "us", 50, 1'000'000, "",
     "a provider without a wait descriptor (shm): the longest nap between polls of an idle "
     "instance (naps start at 50 us and double while nothing comes)"},
    {I::wait_descriptor, "ofi_wait_descriptor", "BMI_OFI_WAIT_DESCRIPTOR", T::flag, "1", "", 0, 0,
     "",
     "a test call sleeps on the completion queue's wait descriptor where the provider has one "
     "(an idle instance costs no CPU); 0 = poll, yield and nap as without one: small messages "
     "over rxm return sooner, and an idle instance wakes once per ofi_nap_us"},
    {I::shm_sweep, "ofi_shm_sweep", "BMI_OFI_SHM_SWEEP", T::flag, "1", "", 0, 0, "",
     "an ofi+shm open removes the /dev/shm regions this user's killed ofi+shm clients left "
     "(their PID gone, their name unclaimed); 0 where processes share /dev/shm without "
     "sharing PID and network namespaces (doc/methods/ofi.md)"},
    {I::shm_sweep_period, "ofi_shm_sweep_period_ms", "BMI_OFI_SHM_SWEEP_PERIOD_MS", T::duration,
     "60s", "ms", 100, 24 * hour_ms, "",
     "with ofi_shm_sweep, an ofi+shm server sweeps /dev/shm again this often while it runs, so "
     "the regions of clients killed after it started do not pile up"},
    {I::grants, "ofi_grants", "BMI_OFI_GRANTS", T::flag, "1", "", 0, 0, "",
     "a receive above ofi_eager_bytes (up to ofi_chunk_bytes) posted for one peer and tag "
     "tells that peer it waits, so that its message skips the RTS and CTS; 0 = always RTS"},
    {I::auth_key, "ofi_auth_key", "BMI_OFI_AUTH_KEY", T::text, "", "", 0, 0, "",
     "the authorization key of every ofi+cxi endpoint, SVC_ID:VNI (the CXI service and VNI "
     "this process may use); any other provider refuses to start with one; empty = none"},
};
constexpr support::OwnedRows owned{rows, I::auth_key};
}  // namespace

std::span<const support::SettingSpec> setting_rows() { return owned.all(); }

const support::SettingSpec& setting_spec(SettingId id) { return owned[id]; }

}  // namespace bmi::method::ofi
