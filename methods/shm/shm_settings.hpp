// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method's rows of the settings table (doc/SETTINGS.md): what each shm_* setting
// means, its default and its range. methods/method_table.cpp gathers them with the others;
// the method reads their values from Config::settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "support/settings/setting_table.hpp"

namespace bmi::method::shm {

enum class SettingId : std::uint8_t {
    ring_slots,
    slot_size,
    spin_us,
    transfer_spin_us,
    single_copy,
    single_copy_min,
    split_copy,
    shared_buffers,
    pool_bytes,
    pool_per_class,
    early_peer_bytes,
    early_peer_count,
    early_total_bytes,
    offer_bytes,
    offer_count,
    setup_timeout,
    pending_per_source,
    stall_timeout,
    send_timeout,
    rendezvous_timeout,
    stats,
};
std::span<const support::SettingSpec> setting_rows();
const support::SettingSpec& setting_spec(SettingId id);

}  // namespace bmi::method::shm
