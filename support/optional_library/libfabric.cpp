// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/libfabric.hpp"

#include "support/optional_library/optional_library.hpp"

namespace bmi::support {

namespace {
Libfabric libfabric_table;

void fill(SymbolFiller& take, Libfabric& t) {
    take(t.getinfo, "fi_getinfo");
    take(t.freeinfo, "fi_freeinfo");
    take(t.dupinfo, "fi_dupinfo");
    take(t.fabric, "fi_fabric");
    take(t.strerror, "fi_strerror");
    take(t.tostr, "fi_tostr");
    take(t.version, "fi_version");
}
}  // namespace

const Libfabric* load_libfabric(std::string* why) {
    static OptionalLibrary library({libfabric_file});
    return load_table(library, libfabric_table, fill, why);
}

const Libfabric& fi() { return libfabric_table; }

}  // namespace bmi::support
