// SPDX-License-Identifier: LGPL-2.1-or-later
// The one table of every setting libbmi reads (UCX's ucs_config_field_t): its option-string
// key, environment name, type, default, unit, range and meaning. Settings (settings.hpp) parses
// it once per instance; methods read the result from method::Config and never the environment.
// doc/SETTINGS.md is printed from this table (bmi-info --markdown).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace bmi::support {

enum class SettingType : std::uint8_t {
    size,      // bytes; "4096", "64K", "8MiB", "1G"
    duration,  // milliseconds; "250", "250ms", "10s", "2m"
    count,     // a whole number, negative only where min is
    flag,      // 0/1, no/yes, false/true, off/on
    choice,    // one word of SettingSpec::choices; the value is its index
    text,      // any text
};

// One id per row, in table order.
enum class SettingId : std::uint8_t {
    debug,
    unexpected_quota,
    unexpected_peer_quota,
    key_file,
    unexpected_limit,
    emulate_lists,
    inventory,
    allocation,
    allocation_file,
    allocation_id,
    tcp_spin_us,
    tcp_read_wait_us,
    tcp_legacy,
    tcp_legacy_framing,
    tcp_early_peer_bytes,
    tcp_early_total_bytes,
    tcp_grant_peer_bytes,
    tcp_grant_total_bytes,
    tcp_stall_timeout,
    tcp_rendezvous_timeout,
    tcp_send_timeout,
    tcp_setup_timeout,
    tcp_pending_per_source,
    shm_ring_slots,
    shm_slot_size,
    shm_spin_us,
    shm_single_copy,
    shm_single_copy_min,
    shm_split_copy,
    shm_shared_buffers,
    shm_pool_bytes,
    shm_pool_per_class,
    shm_early_bytes,
    shm_early_count,
    shm_early_total,
    shm_offer_bytes,
    shm_offer_count,
    shm_connect_timeout,
    verbs_device,
    verbs_port,
    verbs_gid_index,
    verbs_credits,
    verbs_srq_cap,
    verbs_send_buffers,
    verbs_max_connections,
    verbs_connect_timeout,
    verbs_stats,
    verbs_pending_per_source,
    verbs_early_peer_bytes,
    verbs_early_total_bytes,
};
inline constexpr std::size_t setting_count = static_cast<std::size_t>(SettingId::verbs_early_total_bytes) + 1;

struct SettingSpec {
    SettingId id;
    std::string_view key;           // in BMI_initialize's option string: "tcp_spin_us=20"
    std::string_view env;           // "BMI_TCP_SPIN_US"
    SettingType type;
    std::string_view default_text;  // parsed like any other value (a unit test checks it does)
    std::string_view unit;          // "bytes", "ms", "us", ... ; "" when there is none
    std::int64_t min = 0;           // size, duration (ms), count; ignored for the rest
    std::int64_t max = 0;
    std::string_view choices;       // choice: the words, separated by '|'
    std::string_view meaning;       // one line
    // false: read by the process, not per instance (BMI_DEBUG: logging works before any
    // instance exists), so the environment is its only source.
    bool per_instance = true;
};

std::span<const SettingSpec> setting_table();
const SettingSpec& setting_spec(SettingId id);
// The row with this option-string key, or nullptr.
const SettingSpec* find_setting(std::string_view key);

}  // namespace bmi::support
