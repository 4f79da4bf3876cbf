// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info's settings section: the one table of support/settings/, with the value each
// setting has here and where it came from (like ucx_info -c), or as Markdown for the docs.
#pragma once

#include <ostream>
#include <string_view>

namespace bmi::info {

// Reads the settings as BMI_initialize would with this option string and prints every row:
// variable, option key, value in force, its source, meaning. False if any value is invalid
// (BMI_initialize would then fail with -BMI_EINVAL; the library's warning says why).
bool print_settings(std::ostream& out, std::string_view options);

// The environment names of the settings of one method ("tcp": BMI_TCP_*), comma separated.
void print_setting_names(std::ostream& out, std::string_view scheme);

// The table as Markdown, defaults only (what doc/SETTINGS.md holds).
void print_settings_markdown(std::ostream& out);

}  // namespace bmi::info
