// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/shm/shm_settings.hpp"

#include "methods/shm/shm_wire.hpp"

namespace bmi::method::shm {

namespace {
using T = support::SettingType;
using I = SettingId;
using D = support::PeerDeadline;
using namespace support::setting_units;

// Keys and environment names follow the rule of support's rows (setting_table.cpp).
constexpr support::SettingSpec rows[] = {
    // The ring's own geometry limits (shm_wire.hpp) are the ranges.
    {I::ring_slots, "shm_ring_slots", "BMI_SHM_RING_SLOTS", T::count, "64", "slots", min_slot_count,
     max_slot_count, "", "slots in each ring (a power of two)"},
    {I::slot_size, "shm_slot_size", "BMI_SHM_SLOT_SIZE", T::size, "8K", "bytes", min_slot_size,
     max_slot_size, "", "bytes per ring slot (a power of two)"},
    {I::spin_us, "shm_spin_us", "BMI_SHM_SPIN_US", T::count, "20", "us", 0, 10'000, "",
     "how long a test call polls the rings before it blocks; 0 = block at once"},
    {I::transfer_spin_us, "shm_transfer_spin_us", "BMI_SHM_TRANSFER_SPIN_US", T::count, "500", "us",
     0, 10'000, "",
     "the same while a message above the eager limit moves: its peer copies it now, and a "
     "sleep here costs a wake-up once it is done; 0 = use shm_spin_us"},
    {I::single_copy, "shm_single_copy", "BMI_SHM_SINGLE_COPY", T::flag, "1", "", 0, 0, "",
     "large messages may use cross-memory copies; 0 = two copies through the ring only"},
    {I::single_copy_min, "shm_single_copy_min", "BMI_SHM_SINGLE_COPY_MIN", T::size, "16M", "bytes",
     0, TiB, "",
     "with split copy off, the smallest message the receiver reads alone (smaller ones stream)"},
    {I::split_copy, "shm_split_copy", "BMI_SHM_SPLIT_COPY", T::choice, "auto", "", 0, 0, "0|1|auto",
     "large messages: 1 = both processes copy, 0 = the receiver alone, auto = whichever was "
     "timed faster per size"},
    {I::shared_buffers, "shm_shared_buffers", "BMI_SHM_SHARED_BUFFERS", T::flag, "1", "", 0, 0, "",
     "BMI_memalloc hands out memory the peer maps too; 0 = ordinary memory"},
    {I::pool_bytes, "shm_pool_bytes", "BMI_SHM_POOL_BYTES", T::size, "64M", "bytes", 0, TiB, "",
     "freed shared buffers kept for reuse, all sizes together; 0 = none"},
    {I::pool_per_class, "shm_pool_per_class", "BMI_SHM_POOL_PER_CLASS", T::count, "16", "buffers",
     0, 65'536, "", "freed shared buffers kept for reuse per size class"},
    {I::early_peer_bytes, "shm_early_peer_bytes", "BMI_SHM_EARLY_PEER_BYTES", T::size, "4M",
     "bytes", 0, TiB, "", "eager messages kept for one peer before any receive wants them",
     "BMI_SHM_EARLY_BYTES"},
    {I::early_peer_count, "shm_early_peer_count", "BMI_SHM_EARLY_PEER_COUNT", T::count, "1024",
     "messages", 0, GiB, "", "eager messages kept for one peer, counted", "BMI_SHM_EARLY_COUNT"},
    {I::early_total_bytes, "shm_early_total_bytes", "BMI_SHM_EARLY_TOTAL_BYTES", T::size, "64M",
     "bytes", 0, TiB, "", "eager messages kept for all peers together", "BMI_SHM_EARLY_TOTAL"},
    {I::offer_bytes, "shm_offer_bytes", "BMI_SHM_OFFER_BYTES", T::size, "1G", "bytes", 0, TiB, "",
     "shared buffers one connection's peer may have us map"},
    {I::offer_count, "shm_offer_count", "BMI_SHM_OFFER_COUNT", T::count, "4096", "regions", 0, GiB,
     "", "shared buffers one connection's peer may have us map, counted"},
    support::peer_deadline_row(
        D::setup, I::setup_timeout, "shm_setup_timeout_ms", "BMI_SHM_SETUP_TIMEOUT_MS",
        "a connection's setup (first connect, backlog retries, or accept, until the handshake "
        "is done) is dropped then; the peer's operations fail with -BMI_ETIMEDOUT",
        "BMI_SHM_CONNECT_TIMEOUT_MS"),
    support::pending_per_source_row(I::pending_per_source, "shm_pending_per_source",
                                    "BMI_SHM_PENDING_PER_SOURCE", "256"),
    support::peer_deadline_row(
        D::stall, I::stall_timeout, "shm_stall_timeout_ms", "BMI_SHM_STALL_TIMEOUT_MS",
        "a transfer the peer started (DATA owed after our CTS, its share of a split copy, the DONE "
        "of one) closes the connection after this long without progress"),
    support::peer_deadline_row(
        D::send, I::send_timeout, "shm_send_timeout_ms", "BMI_SHM_SEND_TIMEOUT_MS",
        "a peer that frees no slot of a full ring for this long loses the connection, and the "
        "sends on it fail"),
    support::peer_deadline_row(
        D::rendezvous, I::rendezvous_timeout, "shm_rendezvous_timeout_ms",
        "BMI_SHM_RENDEZVOUS_TIMEOUT_MS",
        "a large send whose RTS the receiver neither answers nor refuses fails after this long "
        "(its connection closes: the RTS named our buffer)"),
    {I::stats, "shm_stats", "BMI_SHM_STATS", T::flag, "0", "", 0, 0, "",
     "print the method's counters (and the path of each large receive, by size) to stderr "
     "when it is finalized"},
};
constexpr support::OwnedRows owned{rows, I::stats};
}  // namespace

std::span<const support::SettingSpec> setting_rows() { return owned.all(); }

const support::SettingSpec& setting_spec(SettingId id) { return owned[id]; }

}  // namespace bmi::method::shm
