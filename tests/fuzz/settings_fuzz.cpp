// SPDX-License-Identifier: LGPL-2.1-or-later
// Settings as the environment and BMI_initialize's option string give them. The first byte
// picks a row of the setting table; the rest is a value for it (as BMI_<NAME>=value would
// carry it) and, whole, an option string ("tcp_spin_us=20,shm_ring_slots=128").
// Properties: a value parse_setting accepts lies in the row's range and Settings::set takes
// it; the text Settings::shown prints for it (what bmi-info and error messages show) parses
// back to the same value; a rejected value leaves the row at its default.
#include "methods/shm/shm_settings.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "methods/verbs/verbs_settings.hpp"
#include "support/settings/settings.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::support;

namespace {
// Every row, as method::all_settings() gathers them; built here because the fuzz build links
// no method (tests/fuzz/meson.build).
const SettingTable& fuzzed_table() {
    namespace m = bmi::method;
    static const SettingTable table{general_setting_rows(), m::tcp::setting_rows(),
                                    m::shm::setting_rows(), m::verbs::setting_rows()};
    return table;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const SettingTable& table = fuzzed_table();
    const SettingSpec& spec = table.rows()[in.byte() % table.size()];
    const std::string_view text = in.text();

    Settings settings(table);
    const std::int64_t before = settings.number(spec);
    const auto value = parse_setting(spec, text);
    const int rc = settings.set(spec, text, SettingSource::environment);
    FUZZ_CHECK((rc == 0) == value.has_value());
    if (value) {
        FUZZ_CHECK(settings.number(spec) == *value || spec.type == SettingType::text);
        if (spec.type == SettingType::size || spec.type == SettingType::count ||
            spec.type == SettingType::duration)
            FUZZ_CHECK(*value >= spec.min && *value <= spec.max);
        FUZZ_CHECK(parse_setting(spec, settings.shown(spec)) == value);
    } else {
        FUZZ_CHECK(settings.number(spec) == before && !settings.valid(spec));
    }

    Settings options(table);
    options.load(text);  // strict: errors are logged and counted, never a crash or a default
    return 0;
}
