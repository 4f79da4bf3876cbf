// SPDX-License-Identifier: LGPL-2.1-or-later
// The text forms of support/planes: allocation requests, allocations (BMI_ALLOCATION, a file,
// PMIx) and the inventory an allocator reads. The first byte picks which parser.
// Properties: a parse either succeeds or names what it refused; a parsed request or
// allocation formats to text that parses again to the same text (format_* is what the
// allocator writes and instances read, so the two must agree).
#include <string>

#include "support/planes/allocation.hpp"
#include "support/planes/inventory.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::support::planes;

namespace {
template <class Entry, class Parse, class Format>
void round_trip(std::string_view text, Parse parse, Format format) {
    ParseError error;
    auto entries = parse(text, "fuzz", error);
    if (!entries) {
        FUZZ_CHECK(!error.text().empty());
        return;
    }
    std::string written;
    for (const Entry& entry : *entries) written += format(entry) + "\n";
    ParseError again_error;
    auto again = parse(written, "fuzz", again_error);
    FUZZ_CHECK(again && again->size() == entries->size());
    std::string rewritten;
    for (const Entry& entry : *again) rewritten += format(entry) + "\n";
    FUZZ_CHECK(rewritten == written);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const std::uint8_t which = in.byte() % 3;
    const std::string_view text = in.text();
    if (which == 0) {
        round_trip<RequestEntry>(text, parse_requests, format_request);
    } else if (which == 1) {
        round_trip<Allocation>(text, parse_allocations, format_allocation);
    } else {
        ParseError error;
        auto inventory = parse_inventory(text, "fuzz", error);
        if (!inventory) {
            FUZZ_CHECK(!error.text().empty());
            return 0;
        }
        for (const auto& plane : inventory->planes)
            FUZZ_CHECK(inventory->find(plane.plane.name) != nullptr);
    }
    return 0;
}
