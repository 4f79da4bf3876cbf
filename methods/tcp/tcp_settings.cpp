// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/tcp/tcp_settings.hpp"

#include "methods/tcp/tcp_source_ports.hpp"

namespace bmi::method::tcp {

namespace {
using T = support::SettingType;
using I = SettingId;
using D = support::PeerDeadline;
using namespace support::setting_units;

// Keys and environment names follow the rule of support's rows (setting_table.cpp).
constexpr support::SettingSpec rows[] = {
    {I::spin_us, "tcp_spin_us", "BMI_TCP_SPIN_US", T::count, "50", "us", 0, 10'000, "",
     "how long a test call polls the sockets before it sleeps; 0 = sleep at once"},
    {I::read_wait_us, "tcp_read_wait_us", "BMI_TCP_READ_WAIT_US", T::count, "2000", "us", 0,
     1'000'000, "",
     "a single-threaded process with one connection sleeps up to this long in the socket's "
     "read before it sleeps in epoll (rounded up to the kernel's tick; doc/methods/tcp.md); "
     "0 = always epoll"},
    {I::legacy, "tcp_legacy", "BMI_TCP_LEGACY", T::flag, "0", "", 0, 0, "",
     "never send HELLO: speak only the legacy wire format (tcp_legacy_framing's)"},
    {I::legacy_framing, "tcp_legacy_framing", "BMI_TCP_LEGACY_FRAMING", T::choice, "dialect", "", 0,
     0, "dialect|orangefs|standalone",
     "the framing toward a peer without libbmi's handshake: dialect = the API's (OrangeFS "
     "51903, standalone 51912), or that one whatever the API; accepted peers keep their own"},
    {I::early_peer_bytes, "tcp_early_peer_bytes", "BMI_TCP_EARLY_PEER_BYTES", T::size, "8M",
     "bytes", 64 * KiB, TiB, "",
     "early data (unclaimed eager payloads and announcements) kept for one peer before its "
     "socket is no longer read"},
    {I::early_total_bytes, "tcp_early_total_bytes", "BMI_TCP_EARLY_TOTAL_BYTES", T::size, "256M",
     "bytes", 64 * KiB, TiB, "", "early data kept for all peers together"},
    {I::grant_peer_bytes, "tcp_grant_peer_bytes", "BMI_TCP_GRANT_PEER_BYTES", T::size, "17M",
     "bytes", 0, TiB, "",
     "room reserved for one libbmi peer's large messages to posted receives, so that they "
     "skip the RTS/CTS round trip (a message lands whole even if its receive went to another); "
     "the default holds one grant of the largest size, 16 MiB; 0 = no grants, always RTS "
     "above the eager limit"},
    {I::grant_total_bytes, "tcp_grant_total_bytes", "BMI_TCP_GRANT_TOTAL_BYTES", T::size, "64M",
     "bytes", 0, TiB, "", "room reserved for large messages of all peers together"},
    support::peer_deadline_row(
        D::stall, I::stall_timeout, "tcp_stall_timeout_ms", "BMI_TCP_STALL_TIMEOUT_MS",
        "a frame started and not finished, or DATA owed after our CTS, closes the connection "
        "after this long without a byte"),
    support::peer_deadline_row(
        D::rendezvous, I::rendezvous_timeout, "tcp_rendezvous_timeout_ms",
        "BMI_TCP_RENDEZVOUS_TIMEOUT_MS",
        "a large send whose RTS the receiver neither clears nor refuses fails after this long"),
    support::peer_deadline_row(
        D::send, I::send_timeout, "tcp_send_timeout_ms", "BMI_TCP_SEND_TIMEOUT_MS",
        "a peer that takes none of the bytes we have for it for this long loses the connection, "
        "and the sends on it fail"),
    support::peer_deadline_row(
        D::setup, I::setup_timeout, "tcp_setup_timeout_ms", "BMI_TCP_SETUP_TIMEOUT_MS",
        "a connection that has not finished its handshake this long after the accept (HELLO, the "
        "key's proof, or a legacy peer's first frame) or the connect (the connect and HELLO_ACK) "
        "is closed; the operations waiting on it fail with -BMI_ETIMEDOUT"),
    support::silent_peer_row(I::silent_peer_timeout, "tcp_silent_peer_timeout_ms",
                             "BMI_TCP_SILENT_PEER_TIMEOUT_MS"),
    support::pending_per_source_row(I::pending_per_source, "tcp_pending_per_source",
                                    "BMI_TCP_PENDING_PER_SOURCE", "256"),
    {I::source_ports, "tcp_source_ports", "BMI_TCP_SOURCE_PORTS", T::text, "", "", 0, 0, "",
     "the ports outbound connections come from, highest first: FIRST-LAST (or one port); empty "
     "= the trusted-connection ports in force (BMI_TRUSTED_CONNECTION), else in OrangeFS built "
     "with trusted connections 1-1023 as its own clients take, else the kernel's choice; none "
     "= always the kernel's choice",
     "", true, source_ports_form, "FIRST-LAST (ports 1 .. 65535), one port, none, or empty"},
};
constexpr support::OwnedRows owned{rows, I::source_ports};
}  // namespace

std::span<const support::SettingSpec> setting_rows() { return owned.all(); }

const support::SettingSpec& setting_spec(SettingId id) { return owned[id]; }

}  // namespace bmi::method::tcp
