// SPDX-License-Identifier: LGPL-2.1-or-later
// The only file that reads the BMI_METHOD_* switches: one explicit list, no self-registration
// (static constructors would be dropped by the linker from a static archive).
#include "methods/method_table.hpp"

#include <array>

#include "methods/method_config.hpp"
#include "methods/ofi/ofi_settings.hpp"
#include "methods/shm/shm_settings.hpp"
#include "methods/tcp/tcp_settings.hpp"
#include "methods/verbs/verbs_settings.hpp"
#include "support/method_address/method_address.hpp"
#if BMI_METHOD_TCP
#include "methods/tcp/tcp_method.hpp"
#endif
#if BMI_METHOD_SHM
#include "methods/shm/shm_method.hpp"
#endif
#if BMI_METHOD_VERBS
#include "methods/verbs/verbs_method.hpp"
#endif
#if BMI_METHOD_OFI
#include "methods/ofi/ofi_method.hpp"
#endif

namespace bmi::method {

namespace {
constexpr Descriptor table[] = {
#if BMI_METHOD_TCP
    tcp::descriptor,
#endif
#if BMI_METHOD_SHM
    shm::descriptor,
#endif
#if BMI_METHOD_VERBS
    verbs::descriptor,
#endif
#if BMI_METHOD_OFI
    ofi::descriptor,
#endif
    // A zero-length array is not C++; this sentinel is skipped below.
    Descriptor{"", "", nullptr},
};
}  // namespace

// Every method's rows, in method-table order, whether or not the method is compiled in: the
// table, bmi-info and doc/SETTINGS.md are the same in every build, and an option string
// that tunes a method this build lacks still initializes.
const support::SettingTable& all_settings() {
    static const support::SettingTable table{support::general_setting_rows(), tcp::setting_rows(),
                                             shm::setting_rows(), verbs::setting_rows(),
                                             ofi::setting_rows()};
    return table;
}

std::span<const Descriptor> compiled_methods() {
    return std::span<const Descriptor>(table, std::size(table) - 1);
}

const Descriptor* find_method(std::string_view name_or_scheme) {
    for (const auto& d : compiled_methods())
        if (d.name == name_or_scheme || d.scheme == name_or_scheme ||
            (!d.alias_name.empty() && d.alias_name == name_or_scheme) ||
            (!d.alias_scheme.empty() && d.alias_scheme == name_or_scheme))
            return &d;
    return nullptr;
}

std::string_view canonical_scheme(std::string_view scheme) {
    for (const auto& d : compiled_methods())
        if (!d.alias_scheme.empty() && d.alias_scheme == scheme) return d.scheme;
    return scheme;
}

std::string canonical_address(std::string_view address) {
    auto parts = support::split_scheme(address);
    if (!parts) return std::string(address);
    const std::string_view scheme = canonical_scheme(parts->scheme);
    if (scheme == parts->scheme) return std::string(address);
    return std::string(scheme) + "://" + std::string(parts->rest);
}

}  // namespace bmi::method
