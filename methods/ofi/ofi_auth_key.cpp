// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_auth_key.hpp"

#include <charconv>
#include <cstddef>
#include <cstring>
#include <limits>

#include "bmi-types.h"

namespace bmi::method::ofi {

namespace {
// A whole decimal number in [1, limit]: cxi has no service 0, and VNI 0 is not one a job gets.
bool decimal(std::string_view text, std::uint64_t limit, std::uint64_t& out) {
    if (text.empty()) return false;
    const char* end = text.data() + text.size();
    auto [stop, error] = std::from_chars(text.data(), end, out);
    return error == std::errc{} && stop == end && out >= 1 && out <= limit;
}
}  // namespace

int parse_auth_key(std::string_view text, std::vector<std::byte>& out, std::string& why) {
    out.clear();
    if (text.empty()) return 0;
    const std::size_t colon = text.find(':');
    std::uint64_t service = 0, vni = 0;
    if (colon == std::string_view::npos ||
        !decimal(text.substr(0, colon), std::numeric_limits<std::uint32_t>::max(), service) ||
        !decimal(text.substr(colon + 1), std::numeric_limits<std::uint16_t>::max(), vni)) {
        why = "expected SVC_ID:VNI (cxi's service 1-4294967295 and VNI 1-65535)";
        return -BMI_EINVAL;
    }
    // Field by field into zeroed bytes, so that the padding the provider copies is zero too.
    const auto service_field = static_cast<std::uint32_t>(service);
    const auto vni_field = static_cast<std::uint16_t>(vni);
    out.assign(sizeof(CxiAuthKey), std::byte{0});
    std::memcpy(out.data() + offsetof(CxiAuthKey, svc_id), &service_field, sizeof service_field);
    std::memcpy(out.data() + offsetof(CxiAuthKey, vni), &vni_field, sizeof vni_field);
    return 0;
}

bool takes_auth_key(std::string_view provider) { return provider == "cxi"; }

}  // namespace bmi::method::ofi
