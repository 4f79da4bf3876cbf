// SPDX-License-Identifier: LGPL-2.1-or-later
// libfabric through a table filled by dlopen (optional_library.hpp), for the ofi method and
// bmi-info. Only these are real symbols: the rest of libfabric's API (fi_domain, fi_tsend,
// fi_cq_read, ...) is inline in its headers and goes through each object's own ops table.
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace bmi::support {

struct Libfabric {
    decltype(&::fi_getinfo) getinfo;
    decltype(&::fi_freeinfo) freeinfo;
    decltype(&::fi_dupinfo) dupinfo;
    decltype(&::fi_fabric) fabric;
    decltype(&::fi_strerror) strerror;
    decltype(&::fi_tostr) tostr;
    decltype(&::fi_version) version;
};

// Every libfabric since 1.0 has this SONAME, 2.x included.
inline constexpr const char* libfabric_file = "libfabric.so.1";

// Opens libfabric on the first call of the process and fills the table (thread-safe); later
// calls give the first answer. nullptr when it is absent or lacks a function: `why` says which.
const Libfabric* load_libfabric(std::string* why = nullptr);

// The table, once load_libfabric() has returned it.
const Libfabric& fi();

}  // namespace bmi::support
