// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's entry in the static method table: libfabric's reliable datagram endpoints,
// over whichever provider the address names ("ofi+tcp://host:port", "ofi+shm://name").
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "methods/method.hpp"

namespace bmi::method::ofi {

// Creates an ofi instance; with a listen address it binds there. -BMI_ENOSYS without
// libfabric, -BMI_ENOPROTOOPT or -BMI_ENODEV when the provider cannot be opened, -BMI_EINVAL
// for a malformed address.
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

// Resolves an address's host (it may block in getaddrinfo); called without any lock, before
// the method's lookup_prepared.
int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out);

inline constexpr Descriptor descriptor{"bmi_ofi", "ofi", &create, &prepare_lookup};

}  // namespace bmi::method::ofi
