// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/settings/setting_table.hpp"

namespace bmi::support {

namespace {
using T = SettingType;
using I = SettingId;
constexpr std::int64_t KiB = 1 << 10, MiB = 1 << 20, GiB = 1 << 30, TiB = GiB << 10;
constexpr std::int64_t hour_ms = 3'600'000;

// The option key is always the environment name without BMI_, in lower case (a unit test
// checks it), so a reader who knows one knows the other.
constexpr SettingSpec rows[] = {
    {I::debug, "debug", "BMI_DEBUG", T::text, "", "", 0, 0, "",
     "log areas: control,address,tcp,shm,verbs,error or all (read once per process, from the "
     "environment only: logging works before any instance exists)",
     false},
    {I::unexpected_quota, "unexpected_quota", "BMI_UNEXPECTED_QUOTA", T::size, "64M", "bytes",
     0, TiB, "", "unexpected messages an instance holds before it stops reading their senders"},
    {I::unexpected_peer_quota, "unexpected_peer_quota", "BMI_UNEXPECTED_PEER_QUOTA", T::size,
     "0", "bytes", 0, TiB, "",
     "what one peer's unexpected messages may hold of the quota; 0 = an eighth of it, at least "
     "64 KiB"},
    {I::key_file, "key_file", "BMI_KEY_FILE", T::text, "", "", 0, 0, "",
     "security key file (32 bytes, or 64 hex digits; mode 0600): only peers that prove the "
     "same key get in (doc/security.md); empty = no key"},
    {I::unexpected_limit, "unexpected_limit", "BMI_UNEXPECTED_LIMIT", T::size, "0", "bytes", 0,
     GiB, "", "largest unexpected message a method accepts; 0 = each method's own (16 KiB)"},
    {I::emulate_lists, "emulate_lists", "BMI_EMULATE_LISTS", T::flag, "0", "", 0, 0, "",
     "pack list I/O into one buffer even for methods that send lists natively"},
    {I::inventory, "inventory", "BMI_INVENTORY", T::text, "", "", 0, 0, "",
     "inventory file that names and pins the cluster's planes (doc/planes.md); bmi-info lists "
     "them beside the discovered ones; empty = discovered planes only"},
    {I::allocation, "allocation", "BMI_ALLOCATION", T::text, "", "", 0, 0, "",
     "the network allocation this instance lives in, in the text form of doc/planes.md (entries "
     "separated by ';'); commas in port lists keep it out of option strings: use "
     "allocation_file= there; empty = none"},
    {I::allocation_file, "allocation_file", "BMI_ALLOCATION_FILE", T::text, "", "", 0, 0, "",
     "a file holding the allocation in the text form of doc/planes.md; empty = none"},
    {I::allocation_id, "allocation_id", "BMI_ALLOCATION_ID", T::text, "", "", 0, 0, "",
     "allocation ids to read from PMIx job information, separated by '+' (doc/planes.md); "
     "without a PMIx launcher or the ids the instance starts as if none were given, and logs "
     "it; a launcher without a loadable libpmix is an error; empty = none"},

    {I::tcp_spin_us, "tcp_spin_us", "BMI_TCP_SPIN_US", T::count, "50", "us", 0, 10'000, "",
     "how long a test call polls the sockets before it sleeps; 0 = sleep at once"},
    {I::tcp_read_wait_us, "tcp_read_wait_us", "BMI_TCP_READ_WAIT_US", T::count, "2000", "us", 0,
     1'000'000, "",
     "a single-threaded process with one connection sleeps up to this long in the socket's "
     "read before it sleeps in epoll (rounded up to the kernel's tick; doc/methods/tcp.md); "
     "0 = always epoll"},
    {I::tcp_legacy, "tcp_legacy", "BMI_TCP_LEGACY", T::flag, "0", "", 0, 0, "",
     "never send HELLO: speak only the legacy wire format (tcp_legacy_framing's)"},
    {I::tcp_legacy_framing, "tcp_legacy_framing", "BMI_TCP_LEGACY_FRAMING", T::choice,
     "dialect", "", 0, 0, "dialect|orangefs|standalone",
     "the framing toward a peer without libbmi's handshake: dialect = the API's (OrangeFS "
     "51903, standalone 51912), or that one whatever the API; accepted peers keep their own"},
    {I::tcp_early_peer_bytes, "tcp_early_peer_bytes", "BMI_TCP_EARLY_PEER_BYTES", T::size, "8M",
     "bytes", 64 * KiB, TiB, "",
     "early data (unclaimed eager payloads and announcements) kept for one peer before its "
     "socket is no longer read"},
    {I::tcp_early_total_bytes, "tcp_early_total_bytes", "BMI_TCP_EARLY_TOTAL_BYTES", T::size,
     "256M", "bytes", 64 * KiB, TiB, "", "early data kept for all peers together"},
    {I::tcp_grant_peer_bytes, "tcp_grant_peer_bytes", "BMI_TCP_GRANT_PEER_BYTES", T::size, "8M",
     "bytes", 0, TiB, "",
     "room reserved for one libbmi peer's large messages to posted receives, so that they "
     "skip the RTS/CTS round trip (a message lands whole even if its receive went to another); "
     "0 = no grants, always RTS above the eager limit"},
    {I::tcp_grant_total_bytes, "tcp_grant_total_bytes", "BMI_TCP_GRANT_TOTAL_BYTES", T::size,
     "64M", "bytes", 0, TiB, "", "room reserved for large messages of all peers together"},
    {I::tcp_stall_timeout, "tcp_stall_timeout_ms", "BMI_TCP_STALL_TIMEOUT_MS", T::duration,
     "10s", "ms", 1, hour_ms, "",
     "a frame started and not finished, or DATA owed after our CTS, closes the connection "
     "after this long without a byte"},
    {I::tcp_rendezvous_timeout, "tcp_rendezvous_timeout_ms", "BMI_TCP_RENDEZVOUS_TIMEOUT_MS",
     T::duration, "120s", "ms", 1, 24 * hour_ms, "",
     "a large send whose RTS the receiver neither clears nor refuses fails after this long"},
    {I::tcp_send_timeout, "tcp_send_timeout_ms", "BMI_TCP_SEND_TIMEOUT_MS", T::duration,
     "120s", "ms", 1, 24 * hour_ms, "",
     "a peer that takes none of the bytes we have for it for this long loses the connection, "
     "and the sends on it fail"},
    {I::tcp_setup_timeout, "tcp_setup_timeout_ms", "BMI_TCP_SETUP_TIMEOUT_MS", T::duration,
     "10s", "ms", 1, hour_ms, "",
     "an accepted connection that has not finished its handshake (HELLO, the key's proof, or "
     "a legacy peer's first frame) this long after the accept is closed"},
    {I::tcp_pending_per_source, "tcp_pending_per_source", "BMI_TCP_PENDING_PER_SOURCE",
     T::count, "256", "handshakes", 1, 65'536, "",
     "accepted connections one source address may have that have not finished their "
     "handshake; a new one beyond it closes that source's oldest"},

    {I::shm_ring_slots, "shm_ring_slots", "BMI_SHM_RING_SLOTS", T::count, "64", "slots", 4,
     4096, "", "slots in each ring (a power of two)"},
    {I::shm_slot_size, "shm_slot_size", "BMI_SHM_SLOT_SIZE", T::size, "8K", "bytes", 256, MiB,
     "", "bytes per ring slot (a power of two)"},
    {I::shm_spin_us, "shm_spin_us", "BMI_SHM_SPIN_US", T::count, "20", "us", 0, 10'000, "",
     "how long a test call polls the rings before it blocks; 0 = block at once"},
    {I::shm_single_copy, "shm_single_copy", "BMI_SHM_SINGLE_COPY", T::flag, "1", "", 0, 0, "",
     "large messages may use cross-memory copies; 0 = two copies through the ring only"},
    {I::shm_single_copy_min, "shm_single_copy_min", "BMI_SHM_SINGLE_COPY_MIN", T::size, "16M",
     "bytes", 0, TiB, "",
     "with split copy off, the smallest message the receiver reads alone (smaller ones stream)"},
    {I::shm_split_copy, "shm_split_copy", "BMI_SHM_SPLIT_COPY", T::choice, "auto", "", 0, 0,
     "0|1|auto",
     "large messages: 1 = both processes copy, 0 = the receiver alone, auto = whichever was "
     "timed faster per size"},
    {I::shm_shared_buffers, "shm_shared_buffers", "BMI_SHM_SHARED_BUFFERS", T::flag, "1", "", 0,
     0, "", "BMI_memalloc hands out memory the peer maps too; 0 = ordinary memory"},
    {I::shm_pool_bytes, "shm_pool_bytes", "BMI_SHM_POOL_BYTES", T::size, "64M", "bytes", 0,
     TiB, "", "freed shared buffers kept for reuse, all sizes together; 0 = none"},
    {I::shm_pool_per_class, "shm_pool_per_class", "BMI_SHM_POOL_PER_CLASS", T::count, "16",
     "buffers", 0, 65'536, "", "freed shared buffers kept for reuse per size class"},
    {I::shm_early_bytes, "shm_early_bytes", "BMI_SHM_EARLY_BYTES", T::size, "4M", "bytes", 0,
     TiB, "", "eager messages kept for one peer before any receive wants them"},
    {I::shm_early_count, "shm_early_count", "BMI_SHM_EARLY_COUNT", T::count, "1024",
     "messages", 0, GiB, "", "eager messages kept for one peer, counted"},
    {I::shm_early_total, "shm_early_total", "BMI_SHM_EARLY_TOTAL", T::size, "64M", "bytes", 0,
     TiB, "", "eager messages kept for all peers together"},
    {I::shm_offer_bytes, "shm_offer_bytes", "BMI_SHM_OFFER_BYTES", T::size, "1G", "bytes", 0,
     TiB, "", "shared buffers one connection's peer may have us map"},
    {I::shm_offer_count, "shm_offer_count", "BMI_SHM_OFFER_COUNT", T::count, "4096",
     "regions", 0, GiB, "", "shared buffers one connection's peer may have us map, counted"},
    {I::shm_connect_timeout, "shm_connect_timeout_ms", "BMI_SHM_CONNECT_TIMEOUT_MS",
     T::duration, "10s", "ms", 1, hour_ms, "",
     "a connection's setup (first connect, backlog retries, or accept, until the handshake "
     "is done) is dropped then; the peer's operations fail with -BMI_ETIMEDOUT"},

    {I::verbs_device, "verbs_device", "BMI_VERBS_DEVICE", T::text, "", "", 0, 0, "",
     "RDMA device name; empty = the first with an active port"},
    {I::verbs_port, "verbs_port", "BMI_VERBS_PORT", T::count, "0", "", 0, 255, "",
     "device port; 0 = the first active one"},
    {I::verbs_gid_index, "verbs_gid_index", "BMI_VERBS_GID_INDEX", T::count, "-1", "", -1,
     65'535, "", "GID table index; -1 = the first IPv4-mapped GID (RoCEv2), else the first"},
    {I::verbs_credits, "verbs_credits", "BMI_VERBS_CREDITS", T::count, "16", "messages", 2,
     1024, "", "eager messages one peer may have in flight to us"},
    {I::verbs_srq_cap, "verbs_srq_cap", "BMI_VERBS_SRQ_CAP", T::count, "1024", "buffers", 2,
     1 << 20, "", "shared receive buffers never grow past this (at least verbs_credits)"},
    {I::verbs_send_buffers, "verbs_send_buffers", "BMI_VERBS_SEND_BUFFERS", T::count, "128",
     "buffers", 1, 65'536, "", "registered buffers for eager sends"},
    {I::verbs_max_connections, "verbs_max_connections", "BMI_VERBS_MAX_CONNECTIONS", T::count,
     "128", "connections", 1, 1 << 20, "",
     "connections at once; sizes the completion queue, which is never resized"},
    {I::verbs_connect_timeout, "verbs_connect_timeout_ms", "BMI_VERBS_CONNECT_TIMEOUT_MS",
     T::duration, "10s", "ms", 1, hour_ms, "",
     "a connection whose handshake is not done by then fails its operations"},
    {I::verbs_stats, "verbs_stats", "BMI_VERBS_STATS", T::flag, "0", "", 0, 0, "",
     "print the method's counters to stderr when it is finalized"},
    {I::verbs_pending_per_source, "verbs_pending_per_source", "BMI_VERBS_PENDING_PER_SOURCE",
     T::count, "8", "handshakes", 1, 65'536, "",
     "bootstrap handshakes in progress that one source address may hold"},
    {I::verbs_early_peer_bytes, "verbs_early_peer_bytes", "BMI_VERBS_EARLY_PEER_BYTES",
     T::size, "8M", "bytes", 64 * KiB, TiB, "",
     "early data (unclaimed eager payloads and announcements) kept for one peer before its "
     "messages wait in the receive queue and its credits are held back"},
    {I::verbs_early_total_bytes, "verbs_early_total_bytes", "BMI_VERBS_EARLY_TOTAL_BYTES",
     T::size, "256M", "bytes", 64 * KiB, TiB, "", "early data kept for all peers together"},
};

constexpr bool rows_in_id_order() {
    for (std::size_t i = 0; i < std::size(rows); ++i)
        if (static_cast<std::size_t>(rows[i].id) != i) return false;
    return std::size(rows) == setting_count;
}
static_assert(rows_in_id_order(), "rows must follow SettingId, one each");
}  // namespace

std::span<const SettingSpec> setting_table() { return rows; }

const SettingSpec& setting_spec(SettingId id) { return rows[static_cast<std::size_t>(id)]; }

const SettingSpec* find_setting(std::string_view key) {
    for (const auto& row : rows)
        if (row.key == key) return &row;
    return nullptr;
}

}  // namespace bmi::support
