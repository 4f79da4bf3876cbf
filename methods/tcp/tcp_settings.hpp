// SPDX-License-Identifier: LGPL-2.1-or-later
// The tcp method's rows of the settings table (doc/SETTINGS.md): what each tcp_* setting
// means, its default and its range. methods/method_table.cpp gathers them with the others;
// the method reads their values from Config::settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "support/settings/setting_table.hpp"

namespace bmi::method::tcp {

enum class SettingId : std::uint8_t {
    spin_us,
    read_wait_us,
    legacy,
    legacy_framing,
    early_peer_bytes,
    early_total_bytes,
    grant_peer_bytes,
    grant_total_bytes,
    stall_timeout,
    rendezvous_timeout,
    send_timeout,
    setup_timeout,
    silent_peer_timeout,
    pending_per_source,
    source_ports,
};
std::span<const support::SettingSpec> setting_rows();
const support::SettingSpec& setting_spec(SettingId id);

}  // namespace bmi::method::tcp
