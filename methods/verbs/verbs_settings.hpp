// SPDX-License-Identifier: LGPL-2.1-or-later
// The verbs method's rows of the settings table (doc/SETTINGS.md): what each verbs_* setting
// means, its default and its range. methods/method_table.cpp gathers them with the others;
// the method reads their values from Config::settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "support/settings/setting_table.hpp"

namespace bmi::method::verbs {

enum class SettingId : std::uint8_t {
    device,
    port,
    gid_index,
    credits,
    srq_cap,
    send_buffers,
    max_connections,
    setup_timeout,
    stats,
    pending_per_source,
    early_peer_bytes,
    early_total_bytes,
    send_timeout,
    rendezvous_timeout,
    staging_peer_bytes,
    staging_total_bytes,
    silent_peer_timeout,
};
std::span<const support::SettingSpec> setting_rows();
const support::SettingSpec& setting_spec(SettingId id);

}  // namespace bmi::method::verbs
