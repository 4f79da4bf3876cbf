// SPDX-License-Identifier: LGPL-2.1-or-later
// ofi address strings: host:port, shm names, domains and the raw form of a provider's own
// address bytes. Properties: an accepted raw address holds 1 to max_raw_bytes bytes and its
// formatted text parses back to the same bytes and provider; a domain or shm name holds no
// separator a provider or a path would split on; host:port has a host and a numeric port.
#include "methods/ofi/ofi_address.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::ofi;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto parsed = parse_address(text);
    if (!parsed) return 0;
    FUZZ_CHECK(!parsed->provider.empty());
    switch (parsed->form) {
        case AddressForm::raw: {
            FUZZ_CHECK(!parsed->raw.empty() && parsed->raw.size() <= max_raw_bytes);
            auto again = parse_address(format_address(parsed->provider, format_raw(parsed->raw)));
            FUZZ_CHECK(again && again->provider == parsed->provider);
            FUZZ_CHECK(again->form == AddressForm::raw && again->raw == parsed->raw);
            break;
        }
        case AddressForm::domain:
            FUZZ_CHECK(parsed->node.find_first_of("/:, ") == std::string::npos);
            FUZZ_CHECK(!socket_addressed(parsed->provider) && parsed->provider != "shm");
            break;
        case AddressForm::shm_name:
            FUZZ_CHECK(!parsed->node.empty() &&
                       parsed->node.find_first_of("/: ") == std::string::npos);
            break;
        case AddressForm::host_port:
            FUZZ_CHECK(!parsed->node.empty() && !parsed->service.empty());
            FUZZ_CHECK(parsed->service.find_first_not_of("0123456789") == std::string::npos);
            break;
    }
    return 0;
}
