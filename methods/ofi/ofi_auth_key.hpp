// SPDX-License-Identifier: LGPL-2.1-or-later
// The authorization key an instance asks of its provider (ofi_auth_key, doc/methods/ofi.md
// "Authorization keys"): on Slingshot, the CXI service and VNI that a job, or a file system
// serving many jobs, has been given. It goes in the domain's attributes, which the endpoint
// inherits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::method::ofi {

// cxi's struct cxi_auth_key (HPE's fi_cxi_ext.h): the service, then the VNI, padded to 8 bytes.
struct CxiAuthKey {
    std::uint32_t svc_id = 0;
    std::uint16_t vni = 0;
};
static_assert(sizeof(CxiAuthKey) == 8);

// "" (no key) or "SVC_ID:VNI", in decimal: 0 and `out` set to cxi's layout (empty for no key),
// or -BMI_EINVAL with `why` saying what is wrong with the text.
int parse_auth_key(std::string_view text, std::vector<std::byte>& out, std::string& why);

// Whether the provider takes an authorization key: cxi. Any other is refused one, so that a
// key meant to fence a job off is never silently dropped.
bool takes_auth_key(std::string_view provider);

}  // namespace bmi::method::ofi
