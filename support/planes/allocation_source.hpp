// SPDX-License-Identifier: LGPL-2.1-or-later
// Where an instance's allocation comes from, decided once when the instance is created. One
// source at most, each a setting of the table (doc/SETTINGS.md) or the program's own text:
//   the C++ API's Session::create(options, allocation)  (the program's text)
//   allocation=      / BMI_ALLOCATION                  (text, entries separated by ';')
//   allocation_file= / BMI_ALLOCATION_FILE             (a file of the same text)
//   allocation_id=   / BMI_ALLOCATION_ID               (ids read from PMIx job information)
// Two sources are an error naming both. Text and files are parsed strictly; PMIx without a
// launcher, or a launcher that holds none of the ids, means "no allocation" (logged), while an
// allocation PMIx holds but that does not parse is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/planes/allocation.hpp"
#include "support/settings/settings.hpp"

namespace bmi::support::planes {

struct InstanceAllocation {
    std::vector<Allocation> entries;         // empty: no allocation in force
    std::string key_file;                    // the key file every keyed entry names, or ""
    std::string encryption;                  // the policy every entry states, or ""
    std::vector<std::uint8_t> key_material;  // PMIx's pmix.alloc.nsec bytes, or empty
    std::uint32_t slice = 0;                 // PMIx local rank (plane_binding.hpp), else 0
    std::string origin;                      // "BMI_ALLOCATION", "file /x", "PMIx ns ids"
};

// 0 (out.entries empty when none is configured), or -BMI_EINVAL after a warning that names the
// setting and the field; -BMI_ENOENT when the file cannot be read.
int resolve_allocation(const Settings& settings, std::string_view program_text,
                       InstanceAllocation& out);

}  // namespace bmi::support::planes
