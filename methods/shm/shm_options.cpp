// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method's tunables, from the instance's settings.
#include "methods/shm/shm_options.hpp"

#include <algorithm>

#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_settings.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// Inline messages up to 16 KiB. Above that a split copy (shm_split.hpp) or streaming wins
// (doc/perf/code-figures.md, "Inline limit"), because both processes copy at once, where an
// inline message is copied twice, one copy after the other.
constexpr auto eager_default = static_cast<bmi_size_t>(max_eager_limit);

// shm_split_copy's choices are "0|1|auto", in that order.
SplitMode split_mode(std::int64_t index) {
    if (index == 0) return SplitMode::never;
    return index == 1 ? SplitMode::always : SplitMode::adaptive;
}

std::size_t bytes(const support::Settings& settings, SettingId id) {
    return static_cast<std::size_t>(settings.number(id));
}
}  // namespace

int load_options(const support::Settings& settings, bmi_size_t unexpected_override, Options& out) {
    // The table bounds each value; only the power-of-two rule is left to check.
    const auto slots = static_cast<std::uint32_t>(settings.number(SettingId::ring_slots));
    const auto slot_size = static_cast<std::uint32_t>(settings.number(SettingId::slot_size));
    if (!valid_geometry(slots, slot_size)) {
        BMI_WARN("shm: ring geometry %u slots x %u bytes is not valid: expected powers of two "
                 "(BMI_SHM_RING_SLOTS %u..%u, BMI_SHM_SLOT_SIZE %u..%u)",
                 slots, slot_size, min_slot_count, max_slot_count, min_slot_size, max_slot_size);
        return -BMI_EINVAL;
    }
    out.slot_count = slots;
    out.slot_size = slot_size;
    out.spin_us = static_cast<int>(settings.number(SettingId::spin_us));
    out.transfer_spin_us = static_cast<int>(settings.number(SettingId::transfer_spin_us));
    out.single_copy = settings.flag(SettingId::single_copy);
    out.print_stats = settings.flag(SettingId::stats);
    out.single_copy_min = settings.number(SettingId::single_copy_min);
    out.split_copy = split_mode(settings.number(SettingId::split_copy));
    out.shared_buffers = settings.flag(SettingId::shared_buffers);
    out.pool.bytes = bytes(settings, SettingId::pool_bytes);
    out.pool.per_class = bytes(settings, SettingId::pool_per_class);
    out.budgets.early = {settings.number(SettingId::early_peer_bytes),
                         settings.number(SettingId::early_peer_count),
                         settings.number(SettingId::early_total_bytes)};
    out.budgets.offer_bytes = bytes(settings, SettingId::offer_bytes);
    out.budgets.offer_count = bytes(settings, SettingId::offer_count);
    out.setup_timeout = settings.duration(SettingId::setup_timeout);
    out.pending_per_source = bytes(settings, SettingId::pending_per_source);
    out.stall_timeout = settings.duration(SettingId::stall_timeout);
    out.send_timeout = settings.duration(SettingId::send_timeout);
    out.rendezvous_timeout = settings.duration(SettingId::rendezvous_timeout);
    // Inline messages may use at most half a ring so two of them can always be in flight.
    bmi_size_t half_ring = static_cast<bmi_size_t>(out.slot_count / 2) * out.slot_size -
                           static_cast<bmi_size_t>(ring_stamp_size + sizeof(MsgHeader));
    out.eager_limit = std::min<bmi_size_t>(eager_default, half_ring);
    bmi_size_t unexpected = unexpected_override > 0 ? unexpected_override
                                                    : default_unexpected_limit;
    out.unexpected_limit = std::min(unexpected, half_ring);
    return 0;
}

}  // namespace bmi::method::shm
