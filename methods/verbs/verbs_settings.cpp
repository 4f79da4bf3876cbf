// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/verbs/verbs_settings.hpp"

namespace bmi::method::verbs {

namespace {
using T = support::SettingType;
using I = SettingId;
using D = support::PeerDeadline;
using namespace support::setting_units;

// Keys and environment names follow the rule of support's rows (setting_table.cpp).
constexpr support::SettingSpec rows[] = {
    {I::device, "verbs_device", "BMI_VERBS_DEVICE", T::text, "", "", 0, 0, "",
     "RDMA device name; empty = the first with an active port"},
    {I::port, "verbs_port", "BMI_VERBS_PORT", T::count, "0", "", 0, 255, "",
     "device port; 0 = the first active one"},
    {I::gid_index, "verbs_gid_index", "BMI_VERBS_GID_INDEX", T::count, "-1", "", -1, 65'535, "",
     "GID table index; -1 = the first IPv4-mapped GID (RoCEv2), else the first"},
    {I::credits, "verbs_credits", "BMI_VERBS_CREDITS", T::count, "16", "messages", 2, 1024, "",
     "eager messages one peer may have in flight to us"},
    {I::srq_cap, "verbs_srq_cap", "BMI_VERBS_SRQ_CAP", T::count, "1024", "buffers", 2, 1 << 20, "",
     "shared receive buffers never grow past this (at least verbs_credits)"},
    {I::send_buffers, "verbs_send_buffers", "BMI_VERBS_SEND_BUFFERS", T::count, "128", "buffers", 1,
     65'536, "", "registered buffers for eager sends"},
    {I::max_connections, "verbs_max_connections", "BMI_VERBS_MAX_CONNECTIONS", T::count, "128",
     "connections", 1, 1 << 20, "",
     "connections at once; sizes the completion queue, which is never resized"},
    support::peer_deadline_row(D::setup, I::setup_timeout, "verbs_setup_timeout_ms",
                               "BMI_VERBS_SETUP_TIMEOUT_MS",
                               "a connection whose handshake is not done by then fails its "
                               "operations",
                               "BMI_VERBS_CONNECT_TIMEOUT_MS"),
    {I::stats, "verbs_stats", "BMI_VERBS_STATS", T::flag, "0", "", 0, 0, "",
     "print the method's counters to stderr when it is finalized"},
    support::pending_per_source_row(I::pending_per_source, "verbs_pending_per_source",
                                    "BMI_VERBS_PENDING_PER_SOURCE", "8"),
    {I::early_peer_bytes, "verbs_early_peer_bytes", "BMI_VERBS_EARLY_PEER_BYTES", T::size, "8M",
     "bytes", 64 * KiB, TiB, "",
     "early data (unclaimed eager payloads and announcements) kept for one peer before its "
     "messages wait in the receive queue and its credits are held back"},
    {I::early_total_bytes, "verbs_early_total_bytes", "BMI_VERBS_EARLY_TOTAL_BYTES", T::size,
     "256M", "bytes", 64 * KiB, TiB, "", "early data kept for all peers together"},
    support::peer_deadline_row(
        D::send, I::send_timeout, "verbs_send_timeout_ms", "BMI_VERBS_SEND_TIMEOUT_MS",
        "a peer that returns no credit for this long while our sends wait for one loses the "
        "connection, and the sends on it fail"),
    support::peer_deadline_row(
        D::rendezvous, I::rendezvous_timeout, "verbs_rendezvous_timeout_ms",
        "BMI_VERBS_RENDEZVOUS_TIMEOUT_MS",
        "a large send whose RTS the receiver does not finish with its FIN fails after this long "
        "(its registration is kept until the FIN or the connection's end)"),
    {I::staging_peer_bytes, "verbs_staging_peer_bytes", "BMI_VERBS_STAGING_PEER_BYTES", T::size,
     "64M", "bytes", 64 * KiB, TiB, "",
     "with encryption: sealed rendezvous data held for one peer to READ; further large sends "
     "to it wait for a FIN (one send alone may exceed it)"},
    {I::staging_total_bytes, "verbs_staging_total_bytes", "BMI_VERBS_STAGING_TOTAL_BYTES", T::size,
     "256M", "bytes", 64 * KiB, TiB, "",
     "with encryption: sealed rendezvous data held for all peers together"},
    support::silent_peer_row(I::silent_peer_timeout, "verbs_silent_peer_timeout_ms",
                             "BMI_VERBS_SILENT_PEER_TIMEOUT_MS"),
};
constexpr support::OwnedRows owned{rows, I::silent_peer_timeout};
}  // namespace

std::span<const support::SettingSpec> setting_rows() { return owned.all(); }

const support::SettingSpec& setting_spec(SettingId id) { return owned[id]; }

}  // namespace bmi::method::verbs
