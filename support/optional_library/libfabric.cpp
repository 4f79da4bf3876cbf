// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/libfabric.hpp"

#include <cstdlib>

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
    // Before libfabric reads its parameters (at its first call): rxm then closes the connection
    // of an address-vector entry we remove. Without it the connection stays and reports its
    // messages under the removed entry's fi_addr, which libfabric gives the next peer inserted:
    // an endpoint we refused could speak as the key holder that came after it. A value the
    // user set is kept.
    static const bool cleanup_asked = setenv("FI_AV_REMOVE_CLEANUP", "1", 0) == 0;
    (void)cleanup_asked;
    static OptionalLibrary library({libfabric_file});
    return load_table(library, libfabric_table, fill, why);
}

const Libfabric& fi() { return libfabric_table; }

}  // namespace bmi::support
