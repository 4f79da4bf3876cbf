// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's rows of the settings table (doc/SETTINGS.md): what each ofi_* setting means,
// its default and its range. methods/method_table.cpp gathers them with the others; the method
// reads their values from Config::settings.
#pragma once

#include <cstdint>
#include <span>

#include "support/settings/setting_table.hpp"

namespace bmi::method::ofi {

enum class SettingId : std::uint8_t {
    eager_bytes,
    chunk_bytes,
    recv_buffers,
    early_peer_bytes,
    early_total_bytes,
    setup_timeout,
    stall_timeout,
    send_timeout,
    rendezvous_timeout,
    silent_peer_timeout,
    pending_per_source,
    pending_total,
    spin_us,
    transfer_spin_us,
    nap_us,
    wait_descriptor,
    shm_sweep,
    shm_sweep_period,
    grants,
    auth_key,
};
std::span<const support::SettingSpec> setting_rows();
const support::SettingSpec& setting_spec(SettingId id);

}  // namespace bmi::method::ofi
