// SPDX-License-Identifier: LGPL-2.1-or-later
// The only file that reads the BMI_METHOD_* switches: one explicit list, no self-registration
// (static constructors would be dropped by the linker from a static archive).
#include "methods/method_table.hpp"

#include <array>

#include "methods/method_config.hpp"
#if BMI_METHOD_TCP
#include "methods/tcp/tcp_method.hpp"
#endif
#if BMI_METHOD_SHM
#include "methods/shm/shm_method.hpp"
#endif
#if BMI_METHOD_VERBS
#include "methods/verbs/verbs_method.hpp"
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
    // A zero-length array is not C++; this sentinel is skipped below.
    Descriptor{"", "", nullptr},
};
}  // namespace

std::span<const Descriptor> compiled_methods() {
    return std::span<const Descriptor>(table, std::size(table) - 1);
}

const Descriptor* find_method(std::string_view name_or_scheme) {
    for (const auto& d : compiled_methods())
        if (d.name == name_or_scheme || d.scheme == name_or_scheme) return &d;
    return nullptr;
}

}  // namespace bmi::method
