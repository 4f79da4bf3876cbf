// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bmi/tools/bmi_info_settings.hpp"

#include <iomanip>
#include <string>

#include "methods/method.hpp"
#include "support/settings/settings.hpp"

namespace bmi::info {

namespace {
using support::SettingType;

std::string_view type_name(SettingType type) {
    switch (type) {
        case SettingType::size:
            return "size";
        case SettingType::duration:
            return "duration";
        case SettingType::count:
            return "count";
        case SettingType::flag:
            return "bool";
        case SettingType::choice:
            return "enum";
        case SettingType::text:
            break;
    }
    return "string";
}

// Empty values read as "" in a table, so an unset device is visibly unset.
std::string shown(std::string_view text) {
    return text.empty() ? std::string("\"\"") : std::string(text);
}
}  // namespace

bool print_settings(std::ostream& out, std::string_view options) {
    support::Settings settings(method::all_settings());
    const bool valid = settings.load(options) == 0;
    out << "settings (default < environment BMI_X < BMI_initialize option x=; "
           "doc/SETTINGS.md):\n";
    for (const auto& spec : method::all_settings().rows()) {
        std::string source(support::source_name(settings.source(spec)));
        if (!settings.valid(spec)) source += ": INVALID, BMI_initialize fails";
        std::string value = shown(settings.shown(spec));
        if (!spec.unit.empty() && spec.unit != "bytes" && spec.unit != "ms")
            value.append(" ").append(spec.unit);
        out << "  " << std::left << std::setw(31) << spec.env << " " << std::setw(14) << value
            << " (" << source << ")  " << spec.meaning;
        for (std::string_view former : support::former_names(spec)) out << "; formerly " << former;
        out << "\n";
    }
    return valid;
}

void print_setting_names(std::ostream& out, std::string_view scheme) {
    const char* separator = "";
    for (const auto& spec : method::all_settings().rows()) {
        if (spec.key.size() <= scheme.size() || spec.key.substr(0, scheme.size()) != scheme ||
            spec.key[scheme.size()] != '_')
            continue;
        out << separator << spec.env;
        separator = ", ";
    }
}

void print_settings_markdown(std::ostream& out) {
    out << "| environment | option key | type | default | unit | range | meaning |\n"
           "| --- | --- | --- | --- | --- | --- | --- |\n";
    for (const auto& spec : method::all_settings().rows()) {
        const auto formers = support::former_names(spec);
        out << "| `" << spec.env << '`';
        for (std::string_view former : formers) out << " (formerly `" << former << "`)";
        out << " | ";
        // Streamed, not built as "`" + std::string(key): gcc 12 at -O3 warns falsely
        // (-Wrestrict) about the string that inserts at its front.
        if (spec.per_instance) {
            out << '`' << spec.key << '`';
            for (std::string_view former : formers)
                out << " (formerly `" << support::option_key(former) << "`)";
        } else {
            out << "- (environment only)";
        }
        out << " | " << type_name(spec.type) << " | " << shown(spec.default_text) << " | "
            << (spec.unit.empty() ? "-" : spec.unit) << " | " << support::range_text(spec) << " | "
            << spec.meaning << " |\n";
    }
}

}  // namespace bmi::info
