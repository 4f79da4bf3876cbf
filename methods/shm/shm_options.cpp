// SPDX-License-Identifier: LGPL-2.1-or-later
// Environment and option-string parsing for the shm method.
#include "methods/shm/shm_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "methods/shm/shm_ring.hpp"
#include "methods/shm/shm_wire.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::method::shm {

namespace {
// Inline messages up to 16 KiB. Above that a split copy (shm_split.hpp) or streaming wins
// on the VMs of doc/PERFORMANCE.md (32 KiB ping-pong on the Intel one: 3.7 us split against
// 5.1 us inline, 64 KiB 4.7 against 8.4 us), because both processes copy at once, where an
// inline message is copied twice, one copy after the other.
constexpr auto eager_default = static_cast<bmi_size_t>(max_eager_limit);

// The split mode is parsed as a number like every other option; "auto" is its one word.
constexpr long long split_auto = 2;

using Parser = bool (*)(std::string_view, long long&);

bool parse_number(std::string_view text, long long& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size() && out >= 0;
}

bool parse_split(std::string_view text, long long& out) {
    if (text != "auto") return parse_number(text, out) && out <= 1;
    out = split_auto;
    return true;
}

SplitMode split_mode(long long value) {
    if (value == 0) return SplitMode::never;
    return value == 1 ? SplitMode::always : SplitMode::adaptive;
}

long long split_value(SplitMode mode) {
    if (mode == SplitMode::never) return 0;
    return mode == SplitMode::always ? 1 : split_auto;
}

void from_env(const char* name, long long& value, Parser parse = parse_number) {
    const char* text = std::getenv(name);
    long long parsed = 0;
    if (text != nullptr && parse(text, parsed)) value = parsed;
}

void from_options(std::string_view options, std::string_view key, long long& value,
                  Parser parse = parse_number) {
    for (auto item : support::split_address_list(options)) {
        if (item.size() <= key.size() || item.substr(0, key.size()) != key ||
            item[key.size()] != '=')
            continue;
        long long parsed = 0;
        if (parse(item.substr(key.size() + 1), parsed)) value = parsed;
    }
}
// The budgets a hostile peer runs into are read strictly: a value that is not a plain number
// of the unit is an error naming the setting, never a quiet default (a mistyped budget would
// otherwise leave the limit somewhere its reader does not expect).
bool strict_setting(std::string_view option_string, const char* variable, std::string_view key,
                    long long& value) {
    const char* text = std::getenv(variable);
    if (text != nullptr && !parse_number(text, value)) {
        BMI_LOG(error, "shm: %s='%s' is not a non-negative integer", variable, text);
        return false;
    }
    for (auto item : support::split_address_list(option_string)) {
        if (item.size() <= key.size() || item.substr(0, key.size()) != key ||
            item[key.size()] != '=')
            continue;
        auto given = item.substr(key.size() + 1);
        if (!parse_number(given, value)) {
            BMI_LOG(error, "shm: option %.*s=%.*s is not a non-negative integer",
                    static_cast<int>(key.size()), key.data(), static_cast<int>(given.size()),
                    given.data());
            return false;
        }
    }
    return true;
}

int load_budgets(std::string_view option_string, Budgets& out) {
    long long early_bytes = static_cast<long long>(out.early_bytes);
    long long early_count = static_cast<long long>(out.early_count);
    long long early_total = static_cast<long long>(out.early_total);
    long long offer_bytes = static_cast<long long>(out.offer_bytes);
    long long offer_count = static_cast<long long>(out.offer_count);
    bool ok = strict_setting(option_string, "BMI_SHM_EARLY_BYTES", "shm_early_bytes",
                             early_bytes) &&
              strict_setting(option_string, "BMI_SHM_EARLY_COUNT", "shm_early_count",
                             early_count) &&
              strict_setting(option_string, "BMI_SHM_EARLY_TOTAL", "shm_early_total",
                             early_total) &&
              strict_setting(option_string, "BMI_SHM_OFFER_BYTES", "shm_offer_bytes",
                             offer_bytes) &&
              strict_setting(option_string, "BMI_SHM_OFFER_COUNT", "shm_offer_count",
                             offer_count);
    if (!ok) return -BMI_EINVAL;
    out.early_bytes = static_cast<std::size_t>(early_bytes);
    out.early_count = static_cast<std::size_t>(early_count);
    out.early_total = static_cast<std::size_t>(early_total);
    out.offer_bytes = static_cast<std::size_t>(offer_bytes);
    out.offer_count = static_cast<std::size_t>(offer_count);
    return 0;
}
}  // namespace

int load_options(std::string_view option_string, bmi_size_t unexpected_override, Options& out) {
    long long slots = out.slot_count, slot_size = out.slot_size, spin = out.spin_us;
    long long single = out.single_copy ? 1 : 0;
    long long single_min = out.single_copy_min;
    long long split = split_value(out.split_copy);
    long long shared = out.shared_buffers ? 1 : 0;
    from_env("BMI_SHM_RING_SLOTS", slots);
    from_env("BMI_SHM_SLOT_SIZE", slot_size);
    from_env("BMI_SHM_SPIN_US", spin);
    from_env("BMI_SHM_SINGLE_COPY", single);
    from_env("BMI_SHM_SINGLE_COPY_MIN", single_min);
    from_env("BMI_SHM_SPLIT_COPY", split, parse_split);
    from_env("BMI_SHM_SHARED_BUFFERS", shared);
    // The option string wins over the environment: it is the more specific of the two.
    from_options(option_string, "shm_ring_slots", slots);
    from_options(option_string, "shm_slot_size", slot_size);
    from_options(option_string, "shm_spin_us", spin);
    from_options(option_string, "shm_single_copy", single);
    from_options(option_string, "shm_single_copy_min", single_min);
    from_options(option_string, "shm_split_copy", split, parse_split);
    from_options(option_string, "shm_shared_buffers", shared);
    if (slots > max_slot_count || slot_size > max_slot_size ||
        !valid_geometry(static_cast<std::uint32_t>(slots), static_cast<std::uint32_t>(slot_size))) {
        BMI_LOG(error, "shm: bad ring geometry %lld slots x %lld bytes", slots, slot_size);
        return -BMI_EINVAL;
    }
    if (int rc = load_budgets(option_string, out.budgets); rc != 0) return rc;
    out.slot_count = static_cast<std::uint32_t>(slots);
    out.slot_size = static_cast<std::uint32_t>(slot_size);
    out.spin_us = static_cast<int>(std::min<long long>(spin, 10000));
    out.single_copy = single != 0;
    out.single_copy_min = std::max<long long>(single_min, 0);
    out.split_copy = split_mode(split);
    out.shared_buffers = shared != 0;
    // Inline messages may use at most half a ring so two of them can always be in flight.
    bmi_size_t half_ring = static_cast<bmi_size_t>(out.slot_count / 2) * out.slot_size -
                           static_cast<bmi_size_t>(ring_stamp_size + sizeof(MsgHeader));
    out.eager_limit = std::min<bmi_size_t>(eager_default, half_ring);
    bmi_size_t unexpected = unexpected_override > 0 ? unexpected_override : 16 << 10;
    out.unexpected_limit = std::min(unexpected, half_ring);
    return 0;
}

}  // namespace bmi::method::shm
